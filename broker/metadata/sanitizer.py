"""Kafka's Sanitizer: user names and client ids as safe single steps of a store path."""

from __future__ import annotations

from urllib.parse import quote, unquote


def sanitize(name: str) -> str:
    """URL-encoded as Java's URLEncoder, with "*" and "~" escaped too (Python's quote keeps "~"):
    "/" and every other character is safe; dots stay as they are, as in Kafka."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)
