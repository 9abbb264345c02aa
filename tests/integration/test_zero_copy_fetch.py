"""Fetch responses whose records go from the segment file to the socket (sendfile) on a plaintext
listener: the bytes the log holds, whether the socket takes them all at once or fills up (the
rest then copied); a TLS listener copies them; consumers read_committed get them copied."""

from __future__ import annotations

import asyncio
import socket

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.harness import cluster_config
from tests.integration.raw_client import RawClient
from tests.integration.security_fixtures import certs, client_ssl_context, tls_settings
from tests.integration.test_protocol_edges import FETCH, PRODUCE, create_topic, produce_body

__all__ = ["certs"]  # the session fixture, used here

BATCHES, VALUE_BYTES = 8, 100_000  # ~800 KB: several file regions' worth


async def produced(port: int, topic: str, batches: int = BATCHES) -> None:
    client = await RawClient.connect(port)
    await create_topic(client, topic)
    for n in range(batches):
        batch = encode_batch([(None, bytes([n]) * VALUE_BYTES, [], None)])
        response = await client.request(PRODUCE, 9, produce_body({(topic, 0): batch}))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    await client.close()


async def fetched(client: RawClient, topic: str, isolation_level: int = 0) -> bytes:
    response = await client.request(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20,
        "isolation_level": isolation_level,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 50 << 20}]}]})
    partition = response.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    return bytes(partition.records)


def in_log(broker, topic: str) -> bytes:
    return broker.replica_manager.partitions[(topic, 0)].log.read(0, 50 << 20).records


async def test_records_go_from_the_file_and_arrive_as_the_log_holds_them(async_broker):
    await produced(async_broker.port, "zc")
    client = await RawClient.connect(async_broker.port)
    metrics = async_broker.request_metrics
    assert await fetched(client, "zc") == in_log(async_broker, "zc")
    assert metrics.bytes_sent_from_files == len(in_log(async_broker, "zc"))
    # read_committed looks at the records for aborted transactions: they are read, not sent
    # from the file
    before = metrics.bytes_sent_from_files, metrics.bytes_copied_from_files
    assert await fetched(client, "zc", isolation_level=1) == in_log(async_broker, "zc")
    assert (metrics.bytes_sent_from_files, metrics.bytes_copied_from_files) == before
    await client.close()


async def test_a_socket_that_fills_up_gets_the_rest_copied(async_broker):
    # More than the broker's socket buffer (4 MiB at most) and the client's hold, and this client
    # reads only once the broker has written (one loop): the socket takes part of the records,
    # the rest is queued as bytes.
    await produced(async_broker.port, "full", batches=60)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", async_broker.port))
    client = RawClient(*await asyncio.open_connection(sock=sock))
    metrics = async_broker.request_metrics
    assert await fetched(client, "full") == in_log(async_broker, "full")
    assert metrics.bytes_copied_from_files > 0
    assert metrics.bytes_sent_from_files + metrics.bytes_copied_from_files == len(
        in_log(async_broker, "full"))
    await client.close()


async def test_a_tls_listener_copies_the_records(tmp_path, certs):
    cluster = Cluster(cluster_config(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **tls_settings(certs)}), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        await produced(broker.addresses["PLAINTEXT"][1], "tls")
        client = await RawClient.connect(broker.addresses["SSL"][1],
                                         ssl=client_ssl_context(certs))
        assert await fetched(client, "tls") == in_log(broker, "tls")
        assert broker.request_metrics.bytes_sent_from_files == 0
        await client.close()
    finally:
        await cluster.stop()
