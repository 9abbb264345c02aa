"""partition.metadata: the topic id a partition folder belongs to, in Kafka's text format
("version: 0" then "topic_id: " and the id in URL-safe base64 without padding)."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

PARTITION_METADATA_FILE = "partition.metadata"
VERSION = 0


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def partition_metadata_text(topic_id: uuid.UUID) -> str:
    return f"version: {VERSION}\ntopic_id: {encode_topic_id(topic_id)}\n"


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The folder's topic id; None when there is no file (a folder from before topic ids) or it
    cannot be read as Kafka writes it."""
    try:
        lines = (directory / PARTITION_METADATA_FILE).read_text().splitlines()
        fields = dict(line.split(": ", 1) for line in lines if line)
        if int(fields["version"]) != VERSION:
            return None
        return uuid.UUID(bytes=base64.urlsafe_b64decode(fields["topic_id"] + "=="))
    except (OSError, KeyError, ValueError):
        return None
