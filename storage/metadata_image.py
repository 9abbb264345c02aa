"""The metadata store on disk, as ZooKeeper keeps it: a snapshot of the persistent nodes at one
zxid plus a journal of the transactions committed since, each a framed record (storage/txn_log.py).

Loading is the snapshot, then the journal's records with a newer zxid, in order. A torn journal tail
(a crash in the middle of an append) is where loading stops; a damaged snapshot is an error, since
it was written aside, fsynced and renamed into place and so is never torn.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage.checkpoint import fsync_dir
from storage.txn_log import frame, parse_frames, read_frames

SNAPSHOT = "snapshot"
JOURNAL = "journal"
SNAPSHOT_FORMAT = 2  # 1 was a single JSON document rewritten on every change (read once, converted)
SNAPSHOT_CHUNK = 1000  # nodes per snapshot record: the writer thread holds the GIL for one at a time


class CorruptMetadataError(ValueError):
    """A snapshot or a whole journal record that cannot be read: the files need a person."""


@dataclass(slots=True, frozen=True)
class PersistedNode:
    """A persistent node as it is written: its data and stat, without its children (the paths say)."""

    data: bytes
    czxid: int
    mzxid: int
    pzxid: int
    version: int
    cversion: int


@dataclass(slots=True, frozen=True)
class MetadataTxn:
    """One journal record: a committed transaction's persistent nodes, written whole, and the
    paths it deleted (or a new session, with `zxid` unchanged and no nodes)."""

    zxid: int
    last_session: int
    nodes: dict[str, PersistedNode] = field(default_factory=dict)
    deleted: tuple[str, ...] = ()


@dataclass(slots=True)
class MetadataImage:
    """The persistent nodes at `zxid` (the root included) and the last session id handed out."""

    zxid: int = 0
    last_session: int = 0
    nodes: dict[str, PersistedNode] = field(
        default_factory=lambda: {"/": PersistedNode(b"", 0, 0, 0, 0, 0)})

    def apply(self, txn: MetadataTxn) -> None:
        """Replay a record; one the image already holds (zxid not newer) changes nothing."""
        self.last_session = max(self.last_session, txn.last_session)
        if txn.zxid <= self.zxid:
            return
        for path in txn.deleted:
            self.nodes.pop(path, None)
        self.nodes.update(txn.nodes)
        self.zxid = txn.zxid


@dataclass(slots=True)
class LoadedImage:
    """The metadata image read at start, and what its snapshot and journal held."""
    image: MetadataImage
    snapshot_bytes: int
    journal_bytes: int  # the whole records kept
    torn_bytes: int  # dropped from the journal's tail


def _node_json(node: PersistedNode) -> dict[str, Any]:
    return {"data": base64.b64encode(node.data).decode(), "czxid": node.czxid,
            "mzxid": node.mzxid, "pzxid": node.pzxid, "version": node.version,
            "cversion": node.cversion}


def _node_from_json(n: dict[str, Any]) -> PersistedNode:
    return PersistedNode(base64.b64decode(n["data"]), int(n["czxid"]), int(n["mzxid"]),
                         int(n["pzxid"]), int(n["version"]), int(n["cversion"]))


def encode_txn(txn: MetadataTxn) -> bytes:
    return json.dumps({"zxid": txn.zxid, "last_session": txn.last_session,
                       "nodes": {p: _node_json(n) for p, n in txn.nodes.items()},
                       "deleted": list(txn.deleted)}, separators=(",", ":")).encode()


def decode_txn(payload: bytes) -> MetadataTxn:
    doc = json.loads(payload)
    return MetadataTxn(int(doc["zxid"]), int(doc["last_session"]),
                       {p: _node_from_json(n) for p, n in doc["nodes"].items()},
                       tuple(doc["deleted"]))


def _snapshot_records(image: MetadataImage) -> Iterator[bytes]:
    yield frame(json.dumps({"format": SNAPSHOT_FORMAT, "zxid": image.zxid,
                            "last_session": image.last_session,
                            "count": len(image.nodes)}).encode())
    paths = list(image.nodes)
    for start in range(0, len(paths), SNAPSHOT_CHUNK):
        chunk = {p: _node_json(image.nodes[p]) for p in paths[start:start + SNAPSHOT_CHUNK]}
        yield frame(json.dumps(chunk, separators=(",", ":")).encode())


def write_snapshot(directory: Path, image: MetadataImage) -> int:
    """Write `image` as the snapshot, atomically (temp file, fsync, rename, fsync of the folder);
    return its size. The journal's records up to `image.zxid` are then redundant."""
    tmp, size = directory / (SNAPSHOT + ".tmp"), 0
    with open(tmp, "wb") as f:
        for record in _snapshot_records(image):
            size += f.write(record)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / SNAPSHOT)
    fsync_dir(directory)
    return size


def read_snapshot(path: Path) -> MetadataImage:
    framed = read_frames(path)
    try:
        if framed.torn or not framed.payloads:
            raise ValueError(f"a damaged record at byte {framed.valid_bytes}")
        head = json.loads(framed.payloads[0])
        if head.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"unknown format {head.get('format')!r}")
        image = MetadataImage(int(head["zxid"]), int(head["last_session"]), {})
        for payload in framed.payloads[1:]:
            image.nodes.update((p, _node_from_json(n)) for p, n in json.loads(payload).items())
        if len(image.nodes) != head["count"] or "/" not in image.nodes:
            raise ValueError(f"{len(image.nodes)} nodes, the header says {head['count']}")
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptMetadataError(f"corrupt metadata snapshot {path}: {exc}") from exc
    return image


def read_legacy_store(path: Path) -> MetadataImage:
    """The format-1 file (one JSON document of every persistent node)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != 1:
            raise ValueError(f"unknown format {doc.get('format')!r}")
        image = MetadataImage(int(doc["zxid"]), int(doc["last_session"]))
        image.nodes.update((p, _node_from_json(n)) for p, n in doc["nodes"].items())
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptMetadataError(f"corrupt metadata file {path}: {exc!r}") from exc
    return image


def load_image(directory: Path, *, repair: bool) -> LoadedImage:
    """The snapshot with the journal replayed over it. With `repair`, a torn journal tail is cut
    off the file (the store is about to append after it); without, the files are only read."""
    snapshot = directory / SNAPSHOT
    image = read_snapshot(snapshot) if snapshot.exists() else MetadataImage()
    journal = directory / JOURNAL
    framed = parse_frames(journal.read_bytes()) if journal.exists() else parse_frames(b"")
    for offset, payload in enumerate(framed.payloads):
        try:
            image.apply(decode_txn(payload))
        except (ValueError, KeyError, TypeError) as exc:  # the CRC held: not a torn write
            raise CorruptMetadataError(
                f"corrupt metadata journal {journal}: record {offset}: {exc!r}") from exc
    if repair and framed.torn:
        with open(journal, "r+b") as f:
            f.truncate(framed.valid_bytes)
            f.flush()
            os.fsync(f.fileno())
    size = snapshot.stat().st_size if snapshot.exists() else 0
    return LoadedImage(image, size, framed.valid_bytes, framed.total_bytes - framed.valid_bytes)
