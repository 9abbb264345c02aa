"""TcpTxnMarkerTransport: a transaction coordinator's WriteTxnMarkers to a partition leader in the
multi-process cluster, one connection per leader (Kafka's TransactionMarkerChannelManager keeps a
network client per broker too)."""

from __future__ import annotations

from collections.abc import Callable

from broker.coordinator.transaction.transaction_marker_channel import TxnMarker, marker_results
from broker.interbroker.broker_client import BrokerClient, BrokerUnreachable
from broker.security.client_security import ClientSecurity
from protocol.errors import ErrorCode

WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION = 27, 1
REQUEST_TIMEOUT_S = 40.0  # beyond the leader's own wait for its ISR (30 s)


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

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
