"""Where cluster metadata lives in the metadata store: Kafka's ZooKeeper layout, in one place."""

from __future__ import annotations

CONTROLLER = "/controller"  # ephemeral {"brokerid": N}: who the controller is
CONTROLLER_EPOCH = "/controller_epoch"  # persistent, only grows
BROKER_IDS = "/brokers/ids"  # ephemeral child per live broker: {"host", "port"}
TOPICS = "/brokers/topics"  # child per topic: {"topic_id", "partitions": {p: replicas}}
TOPIC_CONFIGS = "/config/topics"  # child per topic: {"config": {...}}
USER_CONFIGS = "/config/users"  # child per sanitized user (and <default>); clients/<id> below
CLIENT_CONFIGS = "/config/clients"  # child per sanitized client id (and <default>)
CONFIG_CHANGES = "/config/changes"  # sequential config_change_N: {"entity_path": "topics/T"}
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"  # child per topic marked for deletion
ISR_CHANGES = "/isr_change_notification"  # sequential children written by leaders
CLUSTER_ID = "/cluster/id"  # {"version": "1", "id": ...}: the cluster id, written once
PRODUCER_ID_BLOCK = "/latest_producer_id_block"  # {"broker", "block_start", "block_end"}

PERSISTENT_ROOTS = (BROKER_IDS, TOPICS, TOPIC_CONFIGS, CONFIG_CHANGES, DELETE_TOPICS,
                    ISR_CHANGES)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def topic_config(name: str) -> str:
    return f"{TOPIC_CONFIGS}/{name}"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def partition_state(name: str, partition: int) -> str:
    return f"{TOPICS}/{name}/partitions/{partition}/state"
