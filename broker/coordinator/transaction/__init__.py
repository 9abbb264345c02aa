"""Transactions (Kafka's kafka.coordinator.transaction): the transaction coordinator's state per
transactional id and the `__transaction_state` partitions it keeps them in.

May import: broker.coordinator.group (Java's hashCode, shared with it), broker.replication,
broker.metadata, broker.config, storage, protocol, timer.
"""

from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from broker.coordinator.transaction.transaction_marker_channel import (
    MarkerTransport,
    TransactionMarkerChannel,
    TxnMarker,
)
from broker.metadata.topic_names import TRANSACTION_STATE_TOPIC

__all__ = ["TRANSACTION_STATE_TOPIC", "MarkerTransport", "TransactionCoordinator",
           "TransactionMarkerChannel", "TxnMarker"]
