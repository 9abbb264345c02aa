"""The broker: an asyncio Kafka broker and the embedded cluster that runs several of them.

Packages by concern, as Kafka's `core` (see docs/architecture.md), each importing only those below:
config · metadata · control (faults, control API) · replication · controller · admin ·
coordinator · handlers · network · server.
"""
