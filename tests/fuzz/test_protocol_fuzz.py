"""The protocol fuzzer's CI slice: hypothesis over the request grammar (every advertised API
version) and over mutations of real client captures, against one real broker, in process and
over TCP. Deterministic (derandomize) and bounded (about a minute on a busy 2-core machine);
`make fuzz` is the long run.

Oracles, for every input: no exception escapes a request except those the connection answers
by closing; an answer or a close within a second; every answer decodes for its API version;
a fresh connection is still served within a second; RSS stays bounded.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.handlers import HANDLERS
from protocol import decode_request, decode_request_header
from tests.fuzz.campaign import corpus_frames, scratch_dir
from tests.fuzz.grammar import DrawSource, RandomSource, advertised, request_frame, request_frames
from tests.fuzz.mutate import mutate_frame
from tests.fuzz.target import FuzzBroker, rss_bytes

pytestmark = pytest.mark.slow

CLIENT_APIS = advertised()
CONTROLLER_APIS = advertised(controller_apis=True)
KEYS = sorted({key for key, _ in CLIENT_APIS})
CORPUS = corpus_frames()
MAX_RSS_GROWTH = 128 << 20


def fuzz_settings(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


class Running:
    """A FuzzBroker on a loop of its own, so hypothesis' synchronous tests can drive it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.data_dir = scratch_dir()
        self.broker = self.loop.run_until_complete(FuzzBroker(self.data_dir).start())
        self.rss_start = rss_bytes()
        self.inputs = 0

    def run(self, data: bytes, *, tcp: bool = False) -> None:
        self.inputs += 1
        self.loop.run_until_complete(self.broker.run_tcp(data) if tcp else self.broker.run(data))

    def served_promptly(self) -> None:
        self.loop.run_until_complete(self.broker.served_promptly())

    def close(self) -> None:
        self.loop.run_until_complete(self.broker.stop())
        self.loop.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Running]:
    # The broker's warning per refused input stays in pytest's capture: reconfiguring structlog
    # here would outlive the module (loggers cache their level on first use).
    running = Running()
    try:
        yield running
        running.served_promptly()
        rss_end = rss_bytes()
        print(f"\n{running.inputs} inputs; RSS {running.rss_start >> 20} -> {rss_end >> 20} MiB")
        assert rss_end - running.rss_start < MAX_RSS_GROWTH
    finally:
        running.close()


def test_grammar_reaches_every_advertised_version_with_valid_requests():
    """The grammar is the request schema's: for every API version the broker serves, what it
    generates decodes with the project's decoder (the mutations are what make it invalid)."""
    src = RandomSource(random.Random(12))
    every = sorted(set(CLIENT_APIS) | set(CONTROLLER_APIS))
    assert {key for key, _ in every} == set(HANDLERS)
    for api_key, version in every:
        for _ in range(10):
            frame = request_frame(src, api_key, version, 1)
            header, offset = decode_request_header(frame[4:])
            assert (header.api_key, header.api_version) == (api_key, version)
            decode_request(api_key, version, frame[4:], offset)


def test_client_captures_are_answered(fuzzed: Running):
    """The recorded frames of kafka-python, confluent-kafka and aiokafka, as sent: each one is
    answered (or is an acks=0 Produce), none closes the connection."""
    assert len(CORPUS) >= 60
    for frame in CORPUS:
        outcome = fuzzed.loop.run_until_complete(fuzzed.broker.run(frame))
        assert not outcome.closed, frame.hex()
    fuzzed.served_promptly()


@fuzz_settings(1500)
@given(frame=request_frames(CLIENT_APIS))
def test_grammar_requests(fuzzed: Running, frame: bytes):
    fuzzed.run(frame)


@fuzz_settings(1500)
@given(frame=request_frames(CLIENT_APIS), data=st.data())
def test_mutated_grammar_requests(fuzzed: Running, frame: bytes, data):
    fuzzed.run(mutate_frame(DrawSource(data.draw), frame, CORPUS, KEYS))


@fuzz_settings(1500)
@given(frame=st.sampled_from(CORPUS), data=st.data())
def test_mutated_client_captures(fuzzed: Running, frame: bytes, data):
    fuzzed.run(mutate_frame(DrawSource(data.draw), frame, CORPUS, KEYS))


@fuzz_settings(200)
@given(frame=request_frames(CLIENT_APIS) | st.sampled_from(CORPUS), mutate=st.booleans(),
       data=st.data())
def test_over_tcp(fuzzed: Running, frame: bytes, mutate: bool, data):
    fuzzed.run(mutate_frame(DrawSource(data.draw), frame, CORPUS, KEYS) if mutate else frame,
               tcp=True)


@fuzz_settings(400)
@given(frame=request_frames(CONTROLLER_APIS), mutate=st.booleans(), data=st.data())
def test_controller_requests_last(fuzzed: Running, frame: bytes, mutate: bool, data):
    """Forged LeaderAndIsr, StopReplica, UpdateMetadata and ControlledShutdown, after the rest
    (they may legitimately rewrite the broker's view; grammar.advertised says why)."""
    keys = sorted({key for key, _ in CONTROLLER_APIS})
    fuzzed.run(mutate_frame(DrawSource(data.draw), frame, CORPUS, keys) if mutate else frame)
    if fuzzed.inputs % 100 == 0:
        fuzzed.served_promptly()
