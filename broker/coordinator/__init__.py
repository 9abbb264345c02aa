"""Coordinators, each keeping its state in an internal topic (Kafka's kafka.coordinator):
`group/` for consumer groups and `__consumer_offsets`.

May import: broker.replication, broker.metadata, broker.config, storage, protocol, timer.
"""
