"""What a fuzzing run feeds the broker and what it counts: the input mix (grammar, mutated
grammar, mutated client captures, junk), the corpus reader, and the run's figures."""

from __future__ import annotations

import itertools
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from protocol import ProtocolDecodeError, decode_request, decode_request_header
from protocol.framing import FrameDecoder
from tests.fuzz.grammar import Source, request_frame
from tests.fuzz.mutate import mutate_frame
from tests.fuzz.target import FuzzFailure, Outcome

CORPUS = Path(__file__).resolve().parent / "corpus"
CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
# Known issue, suppressed until it is fixed: a request for hundreds to 10,000 new partitions is
# accepted (as Kafka's limit allows), and the controller then rewrites the whole metadata store
# once per partition state on the event loop: seconds to minutes (issue 12, item 3).
MASS_PARTITIONS = range(65, 20_001)


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


def known_issue(data: bytes) -> str | None:
    """Why an input is left out of a run (a known issue not yet fixed), or None."""
    try:
        frames = FrameDecoder(2**31).feed(data)
    except ProtocolDecodeError:
        return None
    for frame in frames:
        try:
            header, offset = decode_request_header(frame)
            if header.api_key not in (CREATE_TOPICS, CREATE_PARTITIONS):
                continue
            request = decode_request(header.api_key, header.api_version, frame, offset,
                                     explain=False)
        except (ProtocolDecodeError, KeyError):
            continue
        counts = [t.get("num_partitions", t.get("count", 0)) for t in request.topics]
        if any(c in MASS_PARTITIONS for c in counts):
            return "mass partition creation (issue 12, item 3)"
    return None


@dataclass(slots=True)
class RunStats:
    """A run's figures; failures are kept (the first few with their input) rather than raised."""

    inputs: int = 0
    suppressed: int = 0  # known issues (known_issue)
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
