"""Test-wide set-up: readable broker logs at info level (debug logs every request)."""

from broker.log_setup import configure_logging

configure_logging("info", json=False)
