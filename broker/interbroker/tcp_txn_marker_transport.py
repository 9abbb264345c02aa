"""TcpTxnMarkerTransport: a transaction coordinator's WriteTxnMarkers to a partition leader in the
multi-process cluster, one connection per leader (Kafka's TransactionMarkerChannelManager keeps a
network client per broker too); and a leader's transaction verification (KIP-890: AddPartitionsToTxn
verify_only) to a coordinator, and a share partition leader's state reads and writes to its share
coordinator, over the same connections."""

from __future__ import annotations

from collections.abc import Callable

from broker.coordinator.transaction.transaction_marker_channel import TxnMarker, marker_results
from broker.interbroker.broker_client import BrokerClient, BrokerUnreachable
from broker.security.client_security import ClientSecurity
from protocol.errors import ErrorCode

WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION = 27, 1
REQUEST_TIMEOUT_S = 40.0  # beyond the leader's own wait for its ISR (30 s)
ADD_PARTITIONS_TO_TXN_KEY, ADD_PARTITIONS_TO_TXN_VERSION = 24, 5
VERIFY_TIMEOUT_S = 10.0  # a coordinator answers from memory
SHARE_STATE_TIMEOUT_S = 10.0  # a write waits for the state topic's ISR (5 s)


class TcpTxnMarkerTransport:
    def __init__(self, broker_id: int,
                 address: Callable[[int], tuple[str, int] | None],
                 security: ClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.security = security
        self._address = address  # a broker's inter-broker address, as metadata knows it now
        self._clients: dict[int, BrokerClient] = {}

    def _client(self, broker_id: int) -> BrokerClient:
        address = self._address(broker_id)
        if address is None:
            raise BrokerUnreachable(f"broker {broker_id} has no known address")
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != address:
            if client is not None:
                client.close()
            client = self._clients[broker_id] = BrokerClient(
                *address, client_id=f"broker-{self.broker_id}-txn-markers", security=self.security)
        return client

    async def write_txn_markers(self, broker_id: int,
                                markers: list[TxnMarker]) -> list[dict[tuple[str, int], ErrorCode]]:
        response = await self._client(broker_id).request(
            WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION,
            {"markers": [marker.to_wire() for marker in markers]}, timeout_s=REQUEST_TIMEOUT_S)
        return marker_results(response.markers)

    async def verify_txn_partitions(self, broker_id: int, transactional_id: str,
                                    producer_id: int, producer_epoch: int,
                                    partitions: set[tuple[str, int]], add: bool = False,
                                    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: AddPartitionsToTxn v5 to the transaction's coordinator, verify_only (or,
        for transactions v2, adding the partitions)."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            topics.setdefault(topic, []).append(partition)
        response = await self._client(broker_id).request(
            ADD_PARTITIONS_TO_TXN_KEY, ADD_PARTITIONS_TO_TXN_VERSION, {"transactions": [{
                "transactional_id": transactional_id, "producer_id": producer_id,
                "producer_epoch": producer_epoch, "verify_only": not add,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]},
            timeout_s=VERIFY_TIMEOUT_S)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        return {(t.name, p.partition_index): ErrorCode(p.partition_error_code)
                for txn in response.results_by_transaction for t in txn.topic_results
                for p in t.results_by_partition}

    async def share_state(self, broker_id: int, api_key: int, body: dict):
        """ReadShareGroupState / WriteShareGroupState (v0) to the share coordinator."""
        return await self._client(broker_id).request(api_key, 0, body,
                                                     timeout_s=SHARE_STATE_TIMEOUT_S)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
