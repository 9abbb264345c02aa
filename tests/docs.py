"""The project's documents as its tests read them: README.md and docs/*.md, a section by its
heading (code blocks, whose shell comments start with '#', are not headings)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section(document: str, heading: str) -> str:
    """The text under the line `heading` ('#'s included) of ROOT/document, up to the next heading
    of its level or above."""
    lines = (ROOT / document).read_text().splitlines(keepends=True)
    level = len(heading) - len(heading.lstrip("#"))
    try:
        start = [line.rstrip("\n") for line in lines].index(heading) + 1
    except ValueError:
        raise AssertionError(f"{document} has no heading {heading!r}") from None
    out, fenced = [], False
    for line in lines[start:]:
        if line.startswith("```"):
            fenced = not fenced
        depth = len(line) - len(line.lstrip("#"))
        if not fenced and 0 < depth <= level and line[depth : depth + 1] == " ":
            break
        out.append(line)
    return "".join(out)
