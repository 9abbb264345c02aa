"""Our ApiVersions answer against Kafka 3.9's (ZooKeeper-mode broker), API by API: every difference
is listed in DIFFERENCES with its reason, so a change on either side fails here until it is explained."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from tests.integration.raw_client import RawClient

API_VERSIONS = 18
ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "tests" / "data" / "kafka_3_9_api_versions.json"
DEFINITIONS = ROOT / "protocol" / "message_definitions"

# api_key -> (our range, or None when not served; why)
DIFFERENCES: dict[int, tuple[tuple[int, int] | None, str]] = {
    8: ((2, 9), "OffsetCommit v0-1: v0 commits to ZooKeeper, v1 carries per-partition timestamps (removed in 4.0)"),
    9: ((1, 9), "OffsetFetch v0: reads offsets from ZooKeeper (removed in 4.0)"),
    23: ((2, 4), "OffsetForLeaderEpoch v0-1: no leader epoch in the answer; clients of message format v2 use v2+"),
    56: (None, "AlterPartition: inter-broker; a leader writes its ISR changes to the metadata store "
               "itself, as a ZK broker below IBP 2.7 does"),
    57: (None, "UpdateFeatures: finalized features (/feature) are not kept"),
    58: (None, "Envelope: only used to forward requests to a KRaft controller (ZK migration)"),
    67: (None, "AllocateProducerIds: inter-broker; producer id blocks are claimed from the metadata "
               "store directly, as a ZK broker below IBP 3.0 does"),
    68: ((0, 1), "ConsumerGroupHeartbeat: KIP-848 consumer groups are served (a ZK-mode 3.9 broker "
                 "answers UNSUPPORTED_VERSION), v1 as Kafka 4.0 (librdkafka 2.16 needs it)"),
    **{key: ((1, 1), f"{name}: KIP-932 share groups are served (share.version=1), v1 as Kafka "
                     "4.1 (a ZK-mode 3.9 broker has no share group API)")
       for key, name in ((76, "ShareGroupHeartbeat"), (77, "ShareGroupDescribe"))},
    **{key: ((1, 2), f"{name}: KIP-932 share groups are served (share.version=1), v1-2 as "
                     "Kafka 4.2 (record-limit acquisition, lock renewal)")
       for key, name in ((78, "ShareFetch"), (79, "ShareAcknowledge"))},
    **{key: ((0, 0), f"{name}: inter-broker, a share partition's leader and its share "
                     "coordinator (__share_group_state), as Kafka 4 serves it")
       for key, name in ((83, "InitializeShareGroupState"), (84, "ReadShareGroupState"),
                         (85, "WriteShareGroupState"), (86, "DeleteShareGroupState"))},
    0: ((0, 12), "Produce v12: transactions v2 (transaction.version=2, KIP-890 part 2), as Kafka 4.0"),
    26: ((0, 5), "EndTxn v5: transactions v2 bump the epoch on every EndTxn, as Kafka 4.0"),
    28: ((0, 5), "TxnOffsetCommit v5: transactions v2 add the offsets partition, as Kafka 4.0"),
    90: ((0, 0), "DescribeShareGroupOffsets: a share group's start offsets (Kafka 4.1's v0)"),
    91: ((0, 0), "AlterShareGroupOffsets: an empty share group's start offsets set (Kafka 4.1's v0)"),
    92: ((0, 0), "DeleteShareGroupOffsets: an empty share group forgets topics (Kafka 4.1's v0)"),
}
# Definitions kept from a later Kafka than 3.9 (the version that needs them), with 3.9's range
LATER_DEFINITIONS = {68: (0, 0), 0: (0, 11), 26: (0, 4), 28: (0, 4)}


def kafka_table() -> dict[int, tuple[int, int]]:
    rows = json.loads(TABLE.read_text())["api_versions"]
    return {row["api_key"]: (row["min_version"], row["max_version"]) for row in rows}


async def advertised(port: int) -> dict[int, tuple[int, int]]:
    client = await RawClient.connect(port)
    response = await client.request(API_VERSIONS, 3, {"client_software_name": "table-test",
                                                      "client_software_version": "1"})
    await client.close()
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_the_kept_table_is_what_the_message_definitions_give_a_zk_broker():
    derived = {}
    for path in DEFINITIONS.glob("*Request.json"):
        spec = json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))
        if "zkBroker" in spec.get("listeners", []) and not spec.get("latestVersionUnstable"):
            low, _, high = spec["validVersions"].partition("-")
            derived[spec["apiKey"]] = (int(low), int(high or low))
    assert kafka_table() == derived | LATER_DEFINITIONS
    # kafka-python's own record of a 3.9 broker agrees.
    assert kafka_table() == BROKER_API_VERSIONS[(3, 9)]


async def test_advertised_ranges_match_kafka_3_9_but_for_the_listed_differences(async_broker):
    ours = await advertised(async_broker.port)
    kafka = kafka_table()
    unexplained = {}
    for key in sorted(set(ours) | set(kafka)):
        expected = DIFFERENCES[key][0] if key in DIFFERENCES else kafka.get(key)
        if ours.get(key) != expected:
            unexplained[key] = {"ours": ours.get(key), "kafka": kafka.get(key), "listed": expected}
    assert unexplained == {}
    # A listed difference that is no difference any more must leave the list.
    assert [key for key in DIFFERENCES if ours.get(key) == kafka.get(key)] == []
    # nothing Kafka's ZK broker would not advertise, but for the listed differences
    assert set(ours) <= set(kafka) | set(DIFFERENCES)


def test_kafka_python_infers_3_9(kafka_broker):
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    try:
        assert admin._client.check_version() == (3, 9)
    finally:
        admin.close()
