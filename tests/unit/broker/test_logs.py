"""The broker's loggers (broker/logs.py): structlog's by default; held while `kafka-sim run`
starts, then logged in order with the time each was logged at, the exception it was logged in, and
the configured level's filter."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime

import pytest
import structlog
from structlog.testing import capture_logs

from broker import logs
from broker.server.log_setup import configure_logging


def loggers() -> tuple[logs.Logger, logs.Logger]:
    """New loggers: structlog's cache the configuration they first log with, and tests change it."""
    return logs.get_logger("kafka_sim.test_logs"), logs.get_logger("kafka_sim.test_logs_other")


@pytest.fixture
def held(capsys) -> Iterator[None]:
    """Hold as `kafka-sim run` does; whatever the test leaves held is released, and the test-wide
    structlog configuration restored, afterwards."""
    saved = structlog.get_config()
    yield
    logs.release()
    structlog.configure(**saved)


def json_lines(err: str) -> list[dict]:
    return [json.loads(line) for line in err.splitlines()]


def after(mark: float) -> float:
    """The wall time once it has moved past `mark` (a few microseconds at most)."""
    while (now := time.time()) <= mark:
        pass
    return now


def test_by_default_lines_go_straight_to_structlog():
    log, other = loggers()
    with capture_logs() as captured:
        log.info("straight", partition=3)
        log.debug("below the test-wide info level")
        other.exception("no exception being handled")
    assert captured == [
        {"event": "straight", "partition": 3, "log_level": "info"},
        {"event": "no exception being handled", "exc_info": True, "log_level": "error"},
    ]


def test_held_lines_wait_and_come_out_in_order_with_the_time_they_were_logged_at(held, capsys):
    log, other = loggers()
    logs.hold_until_serving(lambda: configure_logging("info", json=True))
    log.info("first", broker_id=0)
    other.warning("second", broker_id=1)
    logged_by = time.time()
    log.info("third")
    assert capsys.readouterr().err == ""  # nothing yet
    released_at = after(time.time())
    logs.release()
    log.info("straight through")
    lines = json_lines(capsys.readouterr().err)
    assert [(line["event"], line["level"]) for line in lines] == [
        ("first", "info"), ("second", "warning"), ("third", "info"), ("straight through", "info")]
    assert lines[0]["broker_id"] == 0 and lines[1]["broker_id"] == 1
    stamps = [datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp()
              for line in lines]
    assert all(line["timestamp"].endswith("Z") for line in lines)
    assert stamps == sorted(stamps)
    # The held ones carry their own times, not the release's; the next line is stamped as usual.
    assert stamps[1] <= logged_by + 1e-6 and stamps[2] < released_at
    assert stamps[3] >= released_at - 1e-6
    assert all("_held_at" not in line for line in lines)


def test_a_held_exception_line_keeps_the_exception_it_was_logged_in(held, capsys):
    log, _ = loggers()
    logs.hold_until_serving(lambda: configure_logging("info", json=True))
    try:
        raise ValueError("the first failure")
    except ValueError:
        log.exception("start-up step failed", step="load")
        log.warning("with its traceback too", exc_info=True)
    log.error("no exception here")
    try:
        raise KeyError("a later one")
    except KeyError:
        logs.release()  # released while another exception is handled
    lines = json_lines(capsys.readouterr().err)
    assert [line["event"] for line in lines] == [
        "start-up step failed", "with its traceback too", "no exception here"]
    assert lines[0]["level"] == "error" and lines[0]["step"] == "load"
    for line in lines[:2]:
        assert "ValueError: the first failure" in line["exception"]
        assert "a later one" not in line["exception"]
    assert "exception" not in lines[2]


def test_the_configured_level_filters_the_held_lines(held, capsys):
    log, _ = loggers()
    logs.hold_until_serving(lambda: configure_logging("warning", json=True))
    log.debug("a request")
    log.info("broker started")
    log.warning("a follower fell behind")
    log.error("a log dir failed")
    logs.release()
    log.info("after the release")
    assert [line["event"] for line in json_lines(capsys.readouterr().err)] == [
        "a follower fell behind", "a log dir failed"]


def test_held_lines_are_logged_even_when_the_set_up_fails(held):
    log, _ = loggers()
    def broken() -> None:
        raise RuntimeError("no structlog set-up")

    logs.hold_until_serving(broken)
    log.info("held", broker_id=2)
    with capture_logs() as captured, pytest.raises(RuntimeError):
        logs.release()
    assert [(c["event"], c["broker_id"]) for c in captured] == [("held", 2)]
    with capture_logs() as captured:
        logs.release()  # nothing held any more: nothing happens, lines go straight through
        log.info("straight")
    assert [c["event"] for c in captured] == ["straight"]
