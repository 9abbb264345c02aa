"""The metadata store's files: framed records, snapshot + journal replay, torn tails, format 1."""

import base64
import json

import pytest

from storage.metadata_image import (
    JOURNAL,
    SNAPSHOT,
    CorruptMetadataError,
    MetadataImage,
    MetadataTxn,
    PersistedNode,
    encode_txn,
    load_image,
    read_legacy_store,
    write_snapshot,
)
from storage.txn_log import frame, frames, parse_frames


def node(data: bytes, zxid: int, version: int = 0) -> PersistedNode:
    return PersistedNode(data, zxid, zxid, zxid, version, 0)


def test_frames_round_trip_and_every_cut_is_a_torn_tail():
    payloads = [b"first", b"", b"third record"]
    buf = frames(payloads)
    whole = parse_frames(buf)
    assert whole.payloads == payloads and not whole.torn
    boundaries = [0, len(frame(b"first")), len(frame(b"first")) + len(frame(b""))]
    for cut in range(len(buf)):
        part = parse_frames(buf[:cut])
        kept = max(b for b in boundaries if b <= cut)
        assert part.valid_bytes == kept and part.payloads == payloads[:boundaries.index(kept)]
        assert part.torn == (cut != kept)


def test_a_flipped_bit_ends_the_readable_records():
    buf = bytearray(frames([b"aaaa", b"bbbb", b"cccc"]))
    buf[len(frame(b"aaaa")) + 9] ^= 0x01  # in the second payload
    read = parse_frames(bytes(buf))
    assert read.payloads == [b"aaaa"] and read.valid_bytes == len(frame(b"aaaa")) and read.torn


def test_journal_replays_over_the_snapshot_skipping_what_it_holds(tmp_path):
    image = MetadataImage(2, 1)
    image.nodes["/a"] = node(b"a1", 1)
    image.nodes["/b"] = node(b"b", 2)
    write_snapshot(tmp_path, image)
    # A crash between the snapshot's rename and the journal's truncation leaves the records the
    # snapshot already holds in front of the new ones.
    journal = [MetadataTxn(1, 1, {"/a": node(b"old", 1)}),
               MetadataTxn(2, 1, {"/b": node(b"b", 2)}),
               MetadataTxn(3, 1, {"/a": node(b"a2", 1, version=1)}, ("/b",)),
               MetadataTxn(3, 5)]  # a session: zxid unchanged
    (tmp_path / JOURNAL).write_bytes(frames(encode_txn(t) for t in journal))
    loaded = load_image(tmp_path, repair=True)
    assert (loaded.image.zxid, loaded.image.last_session) == (3, 5)
    assert loaded.image.nodes == {"/": node(b"", 0), "/a": node(b"a2", 1, version=1)}
    assert loaded.torn_bytes == 0 and loaded.snapshot_bytes == (tmp_path / SNAPSHOT).stat().st_size


@pytest.mark.parametrize("repair", [True, False])
def test_a_torn_journal_tail_is_dropped_and_cut_only_on_repair(tmp_path, repair):
    whole = frames([encode_txn(MetadataTxn(1, 0, {"/a": node(b"x", 1)}))])
    torn = frame(encode_txn(MetadataTxn(2, 0, {"/b": node(b"y", 2)})))[:-3]
    (tmp_path / JOURNAL).write_bytes(whole + torn)
    loaded = load_image(tmp_path, repair=repair)
    assert set(loaded.image.nodes) == {"/", "/a"} and loaded.image.zxid == 1
    assert (loaded.journal_bytes, loaded.torn_bytes) == (len(whole), len(torn) )
    assert (tmp_path / JOURNAL).stat().st_size == (len(whole) if repair else len(whole + torn))


def test_a_whole_record_that_is_not_a_transaction_is_corruption(tmp_path):
    (tmp_path / JOURNAL).write_bytes(frame(b"{not json"))
    with pytest.raises(CorruptMetadataError, match="record 0"):
        load_image(tmp_path, repair=True)


def test_snapshot_round_trip_in_chunks(tmp_path):
    image = MetadataImage(7, 3)
    image.nodes.update({f"/n{i}": node(bytes([i % 256]), i) for i in range(2500)})
    write_snapshot(tmp_path, image)
    assert len(parse_frames((tmp_path / SNAPSHOT).read_bytes()).payloads) == 1 + 3
    assert load_image(tmp_path, repair=False).image == image


@pytest.mark.parametrize("damage", ["truncated", "bit flip", "missing chunk", "not a snapshot"])
def test_a_damaged_snapshot_is_an_error(tmp_path, damage):
    image = MetadataImage(1, 0)
    image.nodes.update({f"/n{i}": node(b"x", 1) for i in range(1500)})
    write_snapshot(tmp_path, image)
    path = tmp_path / SNAPSHOT
    buf = bytearray(path.read_bytes())
    if damage == "truncated":
        buf = buf[:-10]
    elif damage == "bit flip":
        buf[40] ^= 0x10
    elif damage == "missing chunk":
        buf = buf[:-len(parse_frames(bytes(buf)).payloads[-1]) - 8]
    else:
        buf = bytearray(b"{}")
    path.write_bytes(bytes(buf))
    with pytest.raises(CorruptMetadataError, match="corrupt metadata snapshot"):
        load_image(tmp_path, repair=True)


def test_the_format_1_file_is_read(tmp_path):
    doc = {"format": 1, "zxid": 4, "last_session": 2, "nodes": {
        "/": {"data": "", "czxid": 0, "mzxid": 0, "pzxid": 3, "version": 0, "cversion": 1},
        "/t": {"data": base64.b64encode(b"{}").decode(), "czxid": 3, "mzxid": 4, "pzxid": 3,
               "version": 1, "cversion": 0}}}
    (tmp_path / "old.json").write_text(json.dumps(doc))
    image = read_legacy_store(tmp_path / "old.json")
    assert (image.zxid, image.last_session) == (4, 2)
    assert image.nodes["/t"] == PersistedNode(b"{}", 3, 4, 3, 1, 0)
    (tmp_path / "bad.json").write_text('{"format": 1, "zx')
    with pytest.raises(CorruptMetadataError, match="bad.json"):
        read_legacy_store(tmp_path / "bad.json")
