"""Transactions (Kafka's kafka.coordinator.transaction): the transaction coordinator's state per
transactional id and the `__transaction_state` partitions it keeps them in.

May import: broker.replication, broker.metadata, broker.config, storage, protocol, timer.
"""
