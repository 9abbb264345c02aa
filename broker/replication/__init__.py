"""Replication (Kafka's kafka.server.ReplicaManager and kafka.cluster.Partition): partitions as
leader or follower, ISR and high watermark, follower fetchers and the LeaderEndpoint they fetch
through, and the delayed operations (DelayedProduce, DelayedFetch, DelayedDeleteRecords) parked in
purgatories on the timing wheel.

May import: broker.metadata, broker.config, storage, protocol, timer.
"""
