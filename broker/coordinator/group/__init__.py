"""Consumer groups (Kafka's kafka.coordinator.group): the classic group protocol's coordinator and
the `__consumer_offsets` partitions it keeps groups and offsets in.

May import: broker.replication (appends with acks=-1, reading its partitions), broker.metadata
(the metadata cache), broker.config, storage, protocol, timer.

Nothing is re-exported here: importing a module of the package (group_metadata, view) must not
load the coordinator, which the server builds on first use (import coordinator.GroupCoordinator).
"""
