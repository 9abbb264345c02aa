"""The simulation's built-in workload: idempotent and transactional producers, read_committed
readers and an offset committer, each a simulated client host, writing down in the history what
the cluster told them (acknowledged offsets, records read, commits) for the checker."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.interbroker.broker_client import BrokerClient, BrokerUnreachable
from broker.simulation.history import History
from broker.simulation.sim_network import SimulatedNetwork
from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches

METADATA, PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH = 3, 0, 1, 8, 9
FIND_COORDINATOR, CREATE_TOPICS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = (
    10, 19, 22, 24, 26)
CONSUMER_GROUP_HEARTBEAT = 68
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types
DELIVERY_TIMEOUT_MS = 20_000  # as a producer's delivery.timeout.ms: then the outcome is unknown
RETRY_BACKOFF_MS = 100
REQUEST_TIMEOUT_S = 5.0  # as a client's request.timeout.ms (and its connect timeout)

# Answers after which the same request may be sent again (a client's retriable errors).
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
             ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
             ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
             ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NETWORK_EXCEPTION,
             ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
             ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
             ErrorCode.UNSTABLE_OFFSET_COMMIT, ErrorCode.OFFSET_NOT_AVAILABLE}
COORDINATOR_MOVED = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


@dataclass(slots=True)
class WorkloadSpec:
    topic: str = "sim"
    partitions: int = 3
    idempotent_producers: int = 2
    transactional_producers: int = 1
    group: str = "sim-offsets"
    consumer_group: str = "sim-consumers"  # its members speak KIP-848's protocol
    group_members: int = 2
    compacted_topic: str = "sim-compacted"  # one partition, cleanup.policy=compact
    keyed_producers: int = 1
    keys: int = 20


class ClusterView:
    """What one simulated client host knows of the cluster: partition leaders and coordinators,
    asked again after an error, and one connection per broker."""

    def __init__(self, network: SimulatedNetwork, host: str, brokers: list[int],
                 rng: random.Random, topic: str) -> None:
        self.network = network
        self.host = host
        self.brokers = brokers
        self.rng = rng
        self.topic = topic
        self.leaders: dict[int, int] = {}
        self.topic_id = bytes(16)
        self._clients: dict[int, BrokerClient] = {}

    async def request(self, broker_id: int, api_key: int, version: int, body: dict,
                      timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
        """One request to broker `broker_id` on this host's connection to it (opened as
        needed); BrokerUnreachable when it breaks or times out, as a client's would."""
        client = self._clients.get(broker_id)
        if client is None:
            broker = f"broker-{broker_id}"
            client = self._clients[broker_id] = BrokerClient(
                broker, 0, self.host, connect_timeout_s=REQUEST_TIMEOUT_S,
                connect=functools.partial(self.network.connect, self.host, broker,
                                          REQUEST_TIMEOUT_S))
        self.network.requests += 1
        return await client.request(api_key, version, body, timeout_s=timeout_s)

    async def any_broker(self, api_key: int, version: int, body: dict):
        """The request to the brokers in a random order until one answers (None: none did)."""
        for broker_id in self.rng.sample(self.brokers, len(self.brokers)):
            try:
                return await self.request(broker_id, api_key, version, body, 2.0)
            except BrokerUnreachable:
                continue
        return None

    async def refresh(self) -> None:
        answer = await self.any_broker(METADATA, 12, {
            "topics": [{"name": self.topic, "topic_id": bytes(16)}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        if answer is None:
            return
        for topic in answer.topics:
            if topic.error_code == 0:
                self.topic_id = bytes(topic.topic_id)
            for p in topic.partitions:
                if p.error_code == 0 and p.leader_id >= 0:
                    self.leaders[p.partition_index] = p.leader_id
                else:
                    self.leaders.pop(p.partition_index, None)

    async def leader(self, partition: int) -> int | None:
        if partition not in self.leaders:
            await self.refresh()
        return self.leaders.get(partition)

    async def coordinator(self, key_type: int, key: str) -> int | None:
        answer = await self.any_broker(FIND_COORDINATOR, 4, {"key_type": key_type,
                                                             "coordinator_keys": [key]})
        if answer is None or answer.coordinators[0].error_code != 0:
            return None
        return answer.coordinators[0].node_id

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


class Actor:
    """One client host of the workload, with its own view of the cluster and its own rng."""

    def __init__(self, name: str, network: SimulatedNetwork, history: History,
                 brokers: list[int], rng: random.Random, spec: WorkloadSpec,
                 wall_ms: Callable[[], int], topic: str | None = None) -> None:
        self.name = name
        self.history = history
        self.rng = rng
        self.spec = spec
        self.wall_ms = wall_ms
        self.view = ClusterView(network, name, brokers, rng, topic or spec.topic)
        self.loop = asyncio.get_running_loop()

    def now_ms(self) -> int:
        return int(self.loop.time() * 1000)

    async def sleep_ms(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)

    def batch(self, values: list[str], producer_id: int, epoch: int, sequence: int,
              transactional: bool = False, keyed: bool = False) -> bytes:
        """A batch of `values`; `keyed`: each record's key is its value up to '=' ("k3=...")."""
        now = self.wall_ms()
        return encode_batch([(v.split("=")[0].encode() if keyed else None, v.encode(), [], now)
                             for v in values],
                            producer_id=producer_id, producer_epoch=epoch,
                            base_sequence=sequence, is_transactional=transactional)

    async def produce(self, partition: int, records: bytes, deadline_ms: int,
                      transactional_id: str | None = None) -> tuple[str, int]:
        """Send one batch until its leader settles it: ("ack", base offset), ("fatal", code)
        when the producer must start again, ("timeout", -1) when its delivery timeout ran out."""
        while self.now_ms() < deadline_ms:
            leader = await self.view.leader(partition)
            if leader is None:
                await self.sleep_ms(RETRY_BACKOFF_MS)
                continue
            try:
                answer = await self.view.request(leader, PRODUCE, 9, {
                    "transactional_id": transactional_id, "acks": -1, "timeout_ms": 3000,
                    "topic_data": [{"name": self.view.topic, "partition_data": [
                        {"index": partition, "records": records}]}]})
            except BrokerUnreachable:
                self.view.leaders.pop(partition, None)
                await self.sleep_ms(RETRY_BACKOFF_MS)
                continue
            result = answer.responses[0].partition_responses[0]
            code = ErrorCode(result.error_code)
            if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                return "ack", result.base_offset
            if code not in RETRIABLE:
                return "fatal", int(code)
            self.view.leaders.pop(partition, None)
            await self.sleep_ms(RETRY_BACKOFF_MS)
        return "timeout", -1

    async def coordinator_call(self, key_type: int, key: str, api_key: int, version: int,
                               body: dict):
        """The request to the coordinator of group or transactional id `key` (FindCoordinator's
        key type); None when it cannot be found or answer."""
        coordinator = await self.view.coordinator(key_type, key)
        if coordinator is None:
            return None
        try:
            return await self.view.request(coordinator, api_key, version, body)
        except BrokerUnreachable:
            return None

    async def init_producer_id(self, transactional_id: str | None, deadline_ms: int
                               ) -> tuple[int, int]:
        """(producer id, epoch), or (-1, -1) when the deadline came first."""
        body = {"transactional_id": transactional_id, "transaction_timeout_ms": 10_000,
                "producer_id": -1, "producer_epoch": -1}
        while self.now_ms() < deadline_ms:
            answer = None
            if transactional_id is None:
                answer = await self.view.any_broker(INIT_PRODUCER_ID, 4, body)
            else:
                answer = await self.coordinator_call(TRANSACTION_KEY, transactional_id,
                                                     INIT_PRODUCER_ID, 4, body)
            if answer is not None and answer.error_code == 0:
                return answer.producer_id, answer.producer_epoch
            await self.sleep_ms(RETRY_BACKOFF_MS)
        return -1, -1


class IdempotentProducer(Actor):
    """enable.idempotence with one batch in flight: each batch is sent again with its sequence
    until acknowledged; when its outcome cannot be known, the producer takes a new id."""

    ACK, UNKNOWN = "ack", "unknown"  # its events

    def next_batch(self, counter: int) -> tuple[int, list[str]]:
        """The partition and the values of its next batch."""
        return (self.rng.randrange(self.spec.partitions),
                [f"{self.name}-{counter + i}" for i in range(self.rng.randint(1, 3))])

    async def run(self, until_ms: int) -> None:
        producer_id = epoch = -1
        sequences: dict[int, int] = {}
        counter = 0
        while self.now_ms() < until_ms:
            await self.sleep_ms(self.rng.randint(20, 120))
            if producer_id < 0:
                producer_id, epoch = await self.init_producer_id(None, until_ms)
                sequences = {}
                if producer_id < 0:
                    continue
            partition, values = self.next_batch(counter)
            counter += len(values)
            sequence = sequences.get(partition, 0)
            outcome, offset = await self.produce(
                partition, self.batch(values, producer_id, epoch, sequence,
                                      keyed=self.ACK != "ack"),
                self.now_ms() + DELIVERY_TIMEOUT_MS)
            if outcome == "ack":
                sequences[partition] = sequence + len(values)
                self.history.record(self.ACK, producer=self.name, partition=partition,
                                    offset=offset, values=tuple(values))
            else:
                self.history.record(self.UNKNOWN, producer=self.name, partition=partition,
                                    values=tuple(values), why=outcome if offset < 0 else offset)
                producer_id = -1


class KeyedProducer(IdempotentProducer):
    """An idempotent producer of keyed records ("k7=keyed-0-12") to the compacted topic's one
    partition, each key written again and again, so the log cleaner has work."""

    ACK, UNKNOWN = "keyed-ack", "keyed-unknown"

    def next_batch(self, counter: int) -> tuple[int, list[str]]:
        return 0, [f"k{self.rng.randrange(self.spec.keys)}={self.name}-{counter + i}"
                   for i in range(self.rng.randint(1, 3))]


class TransactionalProducer(Actor):
    """Transactions over one or two partitions, most committed, some aborted; a failure aborts
    the transaction, or leaves its outcome unknown when the commit was sent."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._sequences: dict[tuple[int, int, int], int] = {}  # (id, epoch, partition) -> next

    async def run(self, until_ms: int) -> None:
        transactional_id = f"{self.name}-id"
        producer_id = epoch = -1
        number = 0
        while self.now_ms() < until_ms:
            await self.sleep_ms(self.rng.randint(50, 300))
            if producer_id < 0:
                producer_id, epoch = await self.init_producer_id(transactional_id, until_ms)
                if producer_id < 0:
                    continue
            number += 1
            txn = f"{self.name}.{number}"
            partitions = sorted(self.rng.sample(range(self.spec.partitions),
                                                self.rng.randint(1, min(2, self.spec.partitions))))
            values = {p: [f"{txn}-{p}-{i}" for i in range(self.rng.randint(1, 3))]
                      for p in partitions}
            written = await self._write(transactional_id, producer_id, epoch, values)
            commit = written and self.rng.random() < 0.7
            ended = await self._end(transactional_id, producer_id, epoch, commit)
            shown = tuple((p, tuple(v)) for p, v in values.items())
            if ended:
                self.history.record("txn-commit" if commit else "txn-abort", producer=self.name,
                                    txn=txn, values=shown)
            elif commit:
                self.history.record("txn-unknown", producer=self.name, txn=txn, values=shown)
            else:  # never committed: the next InitProducerId (or the timeout) aborts it
                self.history.record("txn-abort", producer=self.name, txn=txn, values=shown)
            if not (written and ended):
                producer_id = -1  # a new epoch: sequences start again

    async def _coordinator_request(self, transactional_id: str, api_key: int, version: int,
                                   body: dict, deadline_ms: int) -> int:
        """The request to the transaction coordinator until it answers other than retriable."""
        while self.now_ms() < deadline_ms:
            answer = await self.coordinator_call(TRANSACTION_KEY, transactional_id, api_key,
                                                 version, body)
            if answer is not None:
                code = answer.error_code if api_key == END_TXN else max(
                    (r.partition_error_code for t in answer.results_by_topic_v3_and_below
                     for r in t.results_by_partition), default=0)
                if code not in RETRIABLE:
                    return code
            await self.sleep_ms(RETRY_BACKOFF_MS)
        return int(ErrorCode.REQUEST_TIMED_OUT)

    async def _write(self, transactional_id: str, producer_id: int, epoch: int,
                     values: dict[int, list[str]]) -> bool:
        deadline = self.now_ms() + DELIVERY_TIMEOUT_MS
        added = await self._coordinator_request(transactional_id, ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": self.spec.topic, "partitions": list(values)}]},
            deadline)
        if added != 0:
            self.history.record("txn-failed", producer=self.name, step="AddPartitionsToTxn",
                                error=ErrorCode(added).name)
            return False
        for partition, batch_values in values.items():
            sequence = self._sequences.get((producer_id, epoch, partition), 0)
            outcome, code = await self.produce(
                partition, self.batch(batch_values, producer_id, epoch, sequence, True),
                deadline, transactional_id)
            if outcome != "ack":
                self.history.record("txn-failed", producer=self.name, step="Produce",
                                    error=outcome if code < 0 else ErrorCode(code).name)
                return False
            self._sequences[(producer_id, epoch, partition)] = sequence + len(batch_values)
        return True

    async def _end(self, transactional_id: str, producer_id: int, epoch: int,
                   commit: bool) -> bool:
        code = await self._coordinator_request(transactional_id, END_TXN, 3, {
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": epoch, "committed": commit}, self.now_ms() + DELIVERY_TIMEOUT_MS)
        return code == 0


@dataclass(slots=True)
class FetchedRecords:
    """What one Fetch gave a read_committed reader: data records and where to fetch next."""
    records: list[tuple[int, str]] = field(default_factory=list)  # (offset, value)
    next_offset: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1


def committed_records(data: bytes, aborted: list[tuple[int, int]], position: int
                      ) -> FetchedRecords:
    """The records a read_committed consumer keeps from a Fetch answer: control batches and the
    batches of aborted transactions (the answer's AbortedTransactions list) left out."""
    out = FetchedRecords(next_offset=position)
    pending = sorted(aborted, key=lambda a: a[1])  # (producer id, first offset)
    aborting: set[int] = set()
    for pos, header in iter_batches(data):
        while pending and pending[0][1] <= header.last_offset:
            aborting.add(pending.pop(0)[0])
        out.next_offset = max(out.next_offset, header.next_offset)
        if header.is_control:
            aborting.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        _, records = decode_batch(data, pos)
        out.records.extend((r.offset, (r.value or b"").decode()) for r in records
                           if r.offset >= position)
    return out


class Reader(Actor):
    """A read_committed consumer of one partition, from offset 0, writing down every record."""

    def __init__(self, *args, partition: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.partition = partition
        self.position = 0

    async def fetch(self, isolation: int, position: int, max_wait_ms: int = 200
                    ) -> FetchedRecords | None:
        """One Fetch of this reader's partition from `position` (None: try again)."""
        leader = await self.view.leader(self.partition)
        if leader is None:
            await self.sleep_ms(RETRY_BACKOFF_MS)
            return None
        fetched = await self.fetch_from(leader, {self.partition: position}, isolation,
                                        max_wait_ms)
        return fetched.get(self.partition)

    async def fetch_from(self, leader: int, positions: dict[int, int], isolation: int,
                         max_wait_ms: int) -> dict[int, FetchedRecords]:
        """One Fetch of the partitions `leader` leads, from their positions: what each gave,
        those that failed left out (their leader is asked for again)."""
        try:
            answer = await self.view.request(leader, FETCH, 12, {
                "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": self.view.topic, "partitions": [{
                    "partition": p, "current_leader_epoch": -1, "fetch_offset": position,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 1 << 20} for p, position in sorted(positions.items())]}],
                "forgotten_topics_data": [], "rack_id": ""})
        except BrokerUnreachable:
            for p in positions:
                self.view.leaders.pop(p, None)
            await self.sleep_ms(RETRY_BACKOFF_MS)
            return {}
        out = {}
        for result in answer.responses[0].partitions:
            p = result.partition_index
            if result.error_code != 0:
                if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self.history.record("out-of-range", reader=self.name, partition=p,
                                        offset=positions[p])
                self.view.leaders.pop(p, None)
                continue
            aborted = [(a.producer_id, a.first_offset) for a in result.aborted_transactions or ()]
            fetched = committed_records(bytes(result.records or b""), aborted, positions[p])
            fetched.high_watermark = result.high_watermark
            fetched.last_stable_offset = result.last_stable_offset
            out[p] = fetched
        if len(out) < len(positions):
            await self.sleep_ms(RETRY_BACKOFF_MS)
        return out

    async def read_all(self, isolation: int) -> dict[int, str]:
        """The partition from offset 0 to its high watermark: offset -> value."""
        records: dict[int, str] = {}
        position, high_watermark = 0, None
        while high_watermark is None or position < high_watermark:
            fetched = await self.fetch(isolation, position)
            if fetched is None:
                continue
            records.update(fetched.records)
            high_watermark = fetched.high_watermark
            if fetched.next_offset == position:
                break  # nothing more can be read (should not happen once healed)
            position = fetched.next_offset
        return records

    async def run(self, until_ms: int) -> None:
        while self.now_ms() < until_ms:
            fetched = await self.fetch(1, self.position)
            if fetched is None:
                continue
            for offset, value in fetched.records:
                self.history.record("read", reader=self.name, partition=self.partition,
                                    offset=offset, value=value)
            self.position = fetched.next_offset


class OffsetCommitter(Actor):
    """Commits the readers' positions for group `spec.group` (a group with no members, as
    `kafka-consumer-groups --reset-offsets` commits) and reads them back with require_stable."""

    def __init__(self, *args, readers: list[Reader], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.readers = readers

    async def run(self, until_ms: int) -> None:
        while self.now_ms() < until_ms:
            await self.sleep_ms(self.rng.randint(300, 700))
            positions = {r.partition: r.position for r in self.readers}
            answer = await self.coordinator_call(GROUP_KEY, self.spec.group, OFFSET_COMMIT, 8, {
                "group_id": self.spec.group, "generation_id_or_member_epoch": -1,
                "member_id": "", "group_instance_id": None,
                "topics": [{"name": self.spec.topic, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "committed_metadata": ""} for p, o in sorted(positions.items())]}]})
            if answer is not None:
                for p in answer.topics[0].partitions:
                    if p.error_code == 0:
                        self.history.record("commit", partition=p.partition_index,
                                            offset=positions[p.partition_index])
            sent = self.now_ms()
            answer = await self.coordinator_call(GROUP_KEY, self.spec.group, OFFSET_FETCH, 7, {
                "group_id": self.spec.group, "require_stable": True,
                "topics": [{"name": self.spec.topic,
                            "partition_indexes": sorted(positions)}]})
            if answer is not None and answer.error_code == 0:
                for p in answer.topics[0].partitions:
                    if p.error_code == 0:
                        self.history.record("committed", partition=p.partition_index,
                                            offset=p.committed_offset, asked_ms=sent)


class GroupMember(Actor):
    """A consumer of `spec.topic` in the KIP-848 group `spec.consumer_group`: it heartbeats with
    the partitions it owns, takes what the coordinator assigns from the committed offsets,
    commits with its member epoch, and commits a partition before it gives it up. Records it
    reads are written down as a reader's are; commits the coordinator accepts as group-commit."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.member_id = f"{self.name}-{self.rng.getrandbits(64):016x}"  # v1: the client names it
        self.epoch = 0
        self.owned: dict[int, int] = {}  # partition -> next offset to read
        self.interval_ms = 1_000

    async def _heartbeat(self, leaving: bool = False) -> None:
        if not self.view.topic_id.strip(b"\0"):
            await self.view.refresh()
        answer = await self.coordinator_call(GROUP_KEY, self.spec.consumer_group,
                                             CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": self.spec.consumer_group, "member_id": self.member_id,
            "member_epoch": -1 if leaving else self.epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 10_000, "subscribed_topic_names": [self.spec.topic],
            "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": [{"topic_id": self.view.topic_id,
                                  "partitions": sorted(self.owned)}] if self.owned else []})
        if answer is None or leaving:
            return
        code = ErrorCode(answer.error_code)
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.history.record("fenced", member=self.name, epoch=self.epoch, error=code.name)
            self.epoch, self.owned = 0, {}  # join again, owning nothing
            return
        if code != ErrorCode.NONE:
            return
        self.epoch = answer.member_epoch
        self.interval_ms = answer.heartbeat_interval_ms or self.interval_ms
        if answer.assignment is None:
            return
        target = {p for t in answer.assignment.topic_partitions
                  if bytes(t.topic_id) == self.view.topic_id for p in t.partitions}
        revoked = sorted(set(self.owned) - target)
        if revoked:
            await self._commit(revoked)
            for p in revoked:
                del self.owned[p]
            self.history.record("revoked", member=self.name, epoch=self.epoch,
                                partitions=tuple(revoked))
        added = sorted(target - set(self.owned))
        if added:
            committed = await self._committed(added)
            if committed is not None:
                self.owned.update(committed)
                self.history.record("assigned", member=self.name, epoch=self.epoch,
                                    partitions=tuple(added))

    async def _committed(self, partitions: list[int]) -> dict[int, int] | None:
        answer = await self.coordinator_call(GROUP_KEY, self.spec.consumer_group,
                                             OFFSET_FETCH, 7, {
            "group_id": self.spec.consumer_group, "require_stable": True,
            "topics": [{"name": self.spec.topic, "partition_indexes": partitions}]})
        if answer is None or answer.error_code != 0 or \
                any(p.error_code != 0 for p in answer.topics[0].partitions):
            return None
        return {p.partition_index: max(p.committed_offset, 0) for p in answer.topics[0].partitions}

    async def _commit(self, partitions: list[int]) -> None:
        positions = {p: self.owned[p] for p in partitions if p in self.owned}
        if not positions or self.epoch <= 0:
            return
        epoch = self.epoch
        answer = await self.coordinator_call(GROUP_KEY, self.spec.consumer_group,
                                             OFFSET_COMMIT, 9, {
            "group_id": self.spec.consumer_group, "generation_id_or_member_epoch": epoch,
            "member_id": self.member_id, "group_instance_id": None,
            "topics": [{"name": self.spec.topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p, o in sorted(positions.items())]}]})
        if answer is None:
            return
        for p in answer.topics[0].partitions:
            if p.error_code == 0:
                self.history.record("group-commit", member=self.name, epoch=epoch,
                                    partition=p.partition_index,
                                    offset=positions[p.partition_index])

    async def run(self, until_ms: int) -> None:
        reader = Reader(self.name, self.view.network, self.history, self.view.brokers, self.rng,
                        self.spec, self.wall_ms, partition=0)
        reader.view = self.view  # one host, one set of connections
        next_heartbeat = next_commit = 0
        while self.now_ms() < until_ms:
            if self.now_ms() >= next_heartbeat:
                await self._heartbeat()
                next_heartbeat = self.now_ms() + self.interval_ms
            if self.now_ms() >= next_commit:
                await self._commit(sorted(self.owned))
                next_commit = self.now_ms() + 500
            if not self.owned:
                await self.sleep_ms(100)
                continue
            by_leader: dict[int | None, dict[int, int]] = {}
            for partition, position in sorted(self.owned.items()):
                leader = await self.view.leader(partition)
                by_leader.setdefault(leader, {})[partition] = position
            if None in by_leader:
                await self.sleep_ms(RETRY_BACKOFF_MS)
            for leader, positions in sorted((k, v) for k, v in by_leader.items() if k is not None):
                fetched = await reader.fetch_from(leader, positions, 1, 100)
                for partition, got in sorted(fetched.items()):
                    if self.owned.get(partition) != positions[partition]:
                        continue  # given up (or moved on) while the fetch was out
                    for offset, value in got.records:
                        self.history.record("read", reader=self.name, partition=partition,
                                            offset=offset, value=value)
                    self.owned[partition] = got.next_offset
        await self._commit(sorted(self.owned))
        await self._heartbeat(leaving=True)

