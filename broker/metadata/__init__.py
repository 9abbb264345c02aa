"""Cluster metadata (Kafka's kafka.zk and MetadataCache): the store interface with ZooKeeper's data
model, the embedded store, watch recipes, the znode layout, topic names, partition states, the
metadata cache every broker answers from, and producer-id blocks.

May import: broker.config (listener addresses), storage, protocol.
"""
