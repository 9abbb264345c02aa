"""Topic and config administration (Kafka's ZkAdminManager and AutoTopicCreationManager): create,
grow and delete topics, alter and describe configs, all as writes to the metadata store.

May import: broker.metadata, broker.config, storage, protocol.
"""
