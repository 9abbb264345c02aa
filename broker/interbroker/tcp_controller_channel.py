"""TcpControllerChannel: the controller's LeaderAndIsr, UpdateMetadata and StopReplica sent over
TCP, as Kafka's ControllerChannelManager sends them — one queue, one connection and one sender task
per broker, requests in order, each retried until that broker answers or leaves the cluster."""

from __future__ import annotations

import asyncio
import contextlib

from broker.controller.controller_channel import PartitionErrors
from broker.controller.wire import (
    LEADER_AND_ISR,
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA,
    UPDATE_METADATA_VERSION,
    leader_and_isr_body,
    leader_and_isr_errors,
    stop_replica_body,
    stop_replica_errors,
    update_metadata_body,
)
from broker.interbroker.broker_client import BrokerClient, BrokerUnreachable
from broker.logs import get_logger
from broker.metadata.metadata_cache import MetadataSnapshot
from broker.metadata.partition_state import LeaderAndIsr
from broker.security.client_security import ClientSecurity
from protocol.errors import ErrorCode
from storage.log_config import LogConfig

log = get_logger("kafka_sim.controller_channel")
RETRY_BACKOFF_S = (0.05, 1.0)  # first and largest wait between two tries to a broker
NAMES = {LEADER_AND_ISR: "LeaderAndIsr", STOP_REPLICA: "StopReplica",
         UPDATE_METADATA: "UpdateMetadata"}

Request = tuple[int, int, dict, PartitionErrors | None]  # api key, version, body, its answer's taker


class TcpControllerChannel:
    def __init__(self, controller_id: int, security: ClientSecurity | None = None) -> None:
        self.controller_id = controller_id
        self.security = security
        # The live brokers' registered addresses, as the controller read them
        self._addresses: dict[int, tuple[str, int]] = {}
        self._queues: dict[int, asyncio.Queue[Request]] = {}
        self._senders: dict[int, asyncio.Task] = {}
        self._metadata_body: tuple[MetadataSnapshot, dict] | None = None

    # -- ControllerChannel ------------------------------------------------------------------

    def update_brokers(self, addresses: dict[int, tuple[str, int]]) -> None:
        self._addresses = dict(addresses)

    def send_leader_and_isr(self, broker_id: int, controller_epoch: int,
                            states: list[LeaderAndIsr], configs: dict[str, LogConfig],
                            on_response: PartitionErrors | None = None) -> None:
        leaders = {s.leader for s in states if s.leader >= 0}
        brokers = {b: a for b in leaders if (a := self._addresses.get(b)) is not None}
        self._enqueue(broker_id, (LEADER_AND_ISR, LEADER_AND_ISR_VERSION, leader_and_isr_body(
            self.controller_id, controller_epoch, states, brokers), on_response))

    def send_update_metadata(self, broker_id: int, snapshot: MetadataSnapshot) -> None:
        # The controller sends one snapshot to every live broker: build its body once.
        if self._metadata_body is None or self._metadata_body[0] is not snapshot:
            self._metadata_body = (snapshot, update_metadata_body(snapshot))
        self._enqueue(broker_id, (UPDATE_METADATA, UPDATE_METADATA_VERSION,
                                  self._metadata_body[1], None))

    def send_stop_replica(self, broker_id: int, controller_epoch: int,
                          keys: list[tuple[str, int]], *, delete: bool,
                          on_response: PartitionErrors | None = None) -> None:
        self._enqueue(broker_id, (STOP_REPLICA, STOP_REPLICA_VERSION, stop_replica_body(
            self.controller_id, controller_epoch, keys, delete), on_response))

    # -- queues and senders -----------------------------------------------------------------

    def _enqueue(self, broker_id: int, request: Request) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            queue = self._queues[broker_id] = asyncio.Queue()
            self._senders[broker_id] = asyncio.create_task(
                self._send_loop(broker_id, queue), name=f"controller-channel-{broker_id}")
        queue.put_nowait(request)

    async def _send_loop(self, broker_id: int, queue: asyncio.Queue[Request]) -> None:
        client: BrokerClient | None = None
        try:
            while True:
                api_key, version, body, on_response = await queue.get()
                backoff = RETRY_BACKOFF_S[0]
                while True:
                    try:
                        if client is None:
                            address = self._addresses.get(broker_id)
                            if address is None:  # the broker left: what was meant for it is moot
                                log.info("broker left; dropping controller request",
                                         broker_id=broker_id, api=NAMES[api_key])
                                break
                            client = BrokerClient(*address,
                                                  client_id=f"controller-{self.controller_id}",
                                                  security=self.security)
                        response = await client.request(api_key, version, body)
                    except BrokerUnreachable as exc:
                        log.debug("controller request failed; retrying", broker_id=broker_id,
                                  api=NAMES[api_key], reason=str(exc))
                        if client is not None:  # it may have moved: look it up again
                            client.close()
                            client = None
                        await asyncio.sleep(backoff)
                        backoff = min(backoff * 2, RETRY_BACKOFF_S[1])
                        continue
                    if response.error_code != ErrorCode.NONE:
                        log.warning(f"{NAMES[api_key]} refused", broker_id=broker_id,
                                    error=ErrorCode(response.error_code).name)
                    elif on_response is not None:
                        on_response(leader_and_isr_errors(body, response)
                                    if api_key == LEADER_AND_ISR else stop_replica_errors(response))
                    break
        finally:
            if client is not None:
                client.close()

    async def close(self) -> None:
        for task in self._senders.values():
            task.cancel()
        for task in self._senders.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task  # a sender never ends with an error of its own: it retries
        self._senders.clear()
        self._queues.clear()

