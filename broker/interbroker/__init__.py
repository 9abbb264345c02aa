"""Calls one broker makes to another over TCP, in the Kafka protocol: a small client, the leader
endpoint followers fetch through, and the channel the controller sends its requests on. Used in
the multi-process cluster; the embedded cluster makes the same calls in process.

May import: broker.controller, broker.replication, broker.metadata, broker.config, broker.security
(TLS and SASL toward secured listeners), protocol.
"""
