"""structlog set-up: readable lines on a terminal, JSON lines otherwise."""

from __future__ import annotations

import logging
import sys
from typing import Any

from broker.config import ConfigError
from broker.logs import HELD_AT


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    import structlog  # here, not at the top: `kafka-sim run` loads this module before it serves

    if json is None:
        json = not sys.stderr.isatty()
    renderer = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            _Timestamp(structlog.processors.TimeStamper(fmt="iso", utc=True)),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_number(level)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def level_number(level: str) -> int:
    """logging's number for a level's name, in any case (ConfigError for another name): checked
    before start-up, as structlog is set up only once the brokers serve."""
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None:
        raise ConfigError(f"log.level={level}: not one of debug, info, warning, error, critical")
    return number


class _Timestamp:
    """structlog's TimeStamper (ISO, UTC), except for a line held during start-up
    (broker/logs.py): that one keeps the time it was logged at."""

    def __init__(self, stamper: Any) -> None:
        self._stamper = stamper

    def __call__(self, logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        held_at = event_dict.pop(HELD_AT, None)
        if held_at is None:
            return self._stamper(logger, method, event_dict)
        from datetime import UTC, datetime  # loaded with structlog, not by `kafka-sim run`'s start

        at = datetime.fromtimestamp(held_at, tz=UTC)
        event_dict["timestamp"] = at.isoformat().replace("+00:00", "Z")  # as TimeStamper writes it
        return event_dict
