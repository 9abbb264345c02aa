"""What a fuzzing run feeds the broker and what it counts: the input mix (grammar, mutated
grammar, mutated client captures, junk), the corpus reader, and the run's figures."""

from __future__ import annotations

import itertools
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from protocol.framing import FrameDecoder
from tests.fuzz.grammar import Source, request_frame
from tests.fuzz.mutate import mutate_frame
from tests.fuzz.target import FuzzFailure, Outcome

CORPUS = Path(__file__).resolve().parent / "corpus"


def corpus_frames() -> list[bytes]:
    """The recorded client frames (size prefix included), in file order; regenerate them with
    tests/fuzz/record_corpus.py."""
    frames = []
    for path in sorted(CORPUS.glob("*.bin")):
        frames += [struct.pack(">i", len(f)) + f for f in FrameDecoder(2**31).feed(path.read_bytes())]
    return frames


def scratch_dir() -> Path:
    """The broker's data dir: tmpfs when there is one (fsync costs nothing there, so the run
    measures the broker's code rather than the disk)."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="kafka-sim-fuzz-", dir=shm if shm.is_dir() else None))


def inputs(src: Source, apis: Sequence[tuple[int, int]], corpus: Sequence[bytes]) -> Iterator[bytes]:
    """Endless inputs: 30% fresh grammar frames, 35% mutated grammar frames, 25% mutated client
    captures, 5% captures as sent (two pipelined), 5% junk with a plausible size prefix. Only
    captures of the APIs in `apis` are sent (all of them serve as splice material)."""
    keys = sorted({key for key, _ in apis})
    captures = [f for f in corpus if struct.unpack_from(">h", f, 4)[0] in keys]
    for i in itertools.count():
        roll = src.int(0, 99)
        if roll < 65:
            api_key, version = src.pick(apis)
            frame = request_frame(src, api_key, version, i)
            yield frame if roll < 30 else mutate_frame(src, frame, corpus, keys)
        elif roll < 90 and captures:
            yield mutate_frame(src, src.pick(captures), corpus, keys)
        elif roll < 95 and captures:
            yield src.pick(captures) + src.pick(captures)
        else:
            junk = src.raw(src.int(0, 64))
            yield struct.pack(">i", len(junk)) + junk


@dataclass(slots=True)
class RunStats:
    """A run's figures; failures are kept (the first few with their input) rather than raised."""

    inputs: int = 0
    answered: int = 0
    closed: int = 0
    max_seconds: float = 0.0
    max_wall_seconds: float = 0.0
    failures: list[FuzzFailure] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.inputs += 1
        self.answered += outcome.answered
        self.closed += outcome.closed
        self.max_seconds = max(self.max_seconds, outcome.seconds)
        self.max_wall_seconds = max(self.max_wall_seconds, outcome.wall_seconds)

    def fail(self, failure: FuzzFailure) -> None:
        self.inputs += 1
        self.failures.append(failure)
