"""The controller (Kafka's kafka.controller): one per cluster, elected through the metadata store,
with an epoch that only grows; it elects leaders and tells brokers through a ControllerChannel.

May import: broker.metadata, broker.config, storage, protocol, timer.
"""
