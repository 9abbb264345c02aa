"""Offset checkpoint files: Kafka's text format, atomic replacement, malformed input."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from storage.checkpoint import GROUP_SYNC_MIN, OffsetCheckpointFile, write_texts_atomically
from storage.disk_faults import DiskFaults
from storage.file_sync import can_sync_file_system


def test_round_trip_and_format(tmp_path: Path) -> None:
    file = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    assert file.read() == {}
    offsets = {("orders", 0): 42, ("my-topic", 11): 0, ("a.b_c", 3): 9_000_000_000}
    file.write(offsets)
    assert file.read() == offsets
    lines = file.path.read_text().splitlines()
    assert lines[:2] == ["0", "3"] and "orders 0 42" in lines
    file.write({})
    assert file.read() == {} and file.path.read_text() == "0\n0\n"


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = OffsetCheckpointFile(tmp_path / "cp")
    file.write({("t", 0): 1})

    def crash(*_args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr("storage.checkpoint.os.replace", crash)
    with pytest.raises(OSError):
        file.write({("t", 0): 2})
    assert file.read() == {("t", 0): 1}  # the old file is intact
    monkeypatch.undo()
    file.write({("t", 0): 3})
    assert file.read() == {("t", 0): 3}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\nx\n", "0\n1\nt zero 1\n"],
)
def test_malformed_files(tmp_path: Path, text: str) -> None:
    (tmp_path / "cp").write_text(text)
    with pytest.raises(KafkaError) as info:
        OffsetCheckpointFile(tmp_path / "cp").read()
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a topic named "bad\n" (once accepted) split its row in two; the count is off by one
        ("0\n2\nbad\n 0 5\ngood 0 7\n", {("good", 0): 7}),
        ("0\n2\nt zero 1\ngood 1 3\n", {("good", 1): 3}),
        ("0\nx\ngood 0 1\n", {("good", 0): 1}),
        ("0\n1\ngood 0 1 extra\nok 2 2\n", {("ok", 2): 2}),
        ("7\n1\ngood 0 1\n", {}),
        ("", {}),
    ],
)
def test_lenient_read_skips_what_it_cannot_parse(tmp_path: Path, text: str, expected) -> None:
    (tmp_path / "cp").write_text(text)
    problems: list[str] = []
    assert OffsetCheckpointFile(tmp_path / "cp").read(problems) == expected
    assert problems and all("malformed checkpoint" in p for p in problems)
    with pytest.raises(KafkaError):  # the strict read still refuses the file
        OffsetCheckpointFile(tmp_path / "cp").read()


def test_lenient_read_of_a_good_file_reports_nothing(tmp_path: Path) -> None:
    file = OffsetCheckpointFile(tmp_path / "cp")
    file.write({("a", 0): 1})
    problems: list[str] = []
    assert file.read(problems) == {("a", 0): 1} and problems == []


@pytest.mark.parametrize("count", [3, GROUP_SYNC_MIN + 2])
def test_a_group_of_files_is_written_atomically_each(tmp_path: Path, count: int) -> None:
    """write_texts_atomically: small groups go file by file, big ones as one group commit (two
    syncfs); either way every file is whole, no temp file stays, a file that cannot be written
    and one whose disk has an armed checkpoint fsync fault are reported by their index, and the
    others are written."""
    folders = [tmp_path / f"t-{i}" for i in range(count)]
    for folder in folders:
        folder.mkdir()
    folders[1].rmdir()  # this one's file cannot be made
    (folders[0] / "partition.metadata").write_text("old\n")
    failing = DiskFaults()
    failing.add("fsync", "EIO", files=["checkpoint"])
    failures: list[tuple[int, type]] = []

    def failed(i: int, exc: OSError) -> None:
        failures.append((i, type(exc)))

    synced = write_texts_atomically(
        [(folder / "partition.metadata", f"file {i}\n", failing if i == 2 else None)
         for i, folder in enumerate(folders)], [tmp_path], failed)
    assert synced is (count >= GROUP_SYNC_MIN and can_sync_file_system())
    assert [i for i, _ in failures] == [1, 2]
    assert failures[0][1] is FileNotFoundError
    for i, folder in enumerate(folders):
        if i not in (1, 2):
            assert (folder / "partition.metadata").read_text() == f"file {i}\n"
            assert sorted(p.name for p in folder.iterdir()) == ["partition.metadata"]
    assert not (folders[2] / "partition.metadata").exists()  # never renamed into place
