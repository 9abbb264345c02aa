"""What `kafka-sim ctl transactions` shows of a transactional id: state, producer id and epoch,
partitions, start time and timeout, as its coordinator holds them."""

from __future__ import annotations

from broker.coordinator.transaction.transaction_metadata import TransactionMetadata


def transaction_view(txn: TransactionMetadata, coordinator: int) -> dict:
    return {
        "transactional_id": txn.transactional_id,
        "coordinator": coordinator,
        "state": txn.state.kafka_name,
        "pending_state": txn.pending_state.kafka_name if txn.pending_state is not None else None,
        "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch,
        "timeout_ms": txn.txn_timeout_ms,
        "start_timestamp": txn.txn_start_timestamp,
        "last_update_timestamp": txn.txn_last_update_timestamp,
        "partitions": [{"topic": t, "partition": p} for t, p in sorted(txn.partitions)],
    }
