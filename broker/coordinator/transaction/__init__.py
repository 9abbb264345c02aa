"""Transactions (Kafka's kafka.coordinator.transaction): the transaction coordinator's state per
transactional id and the `__transaction_state` partitions it keeps them in.

May import: broker.coordinator.group (Java's hashCode, shared with it), broker.replication,
broker.metadata, broker.config, storage, protocol, timer.

Nothing is re-exported here, as in `group/`: the server builds the coordinator on first use.
"""
