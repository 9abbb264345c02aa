"""The HTML report of one simulation: the fault timeline, each partition's leader and ISR over
time, produce and consume progress, and the anomalies, as inline SVG in one self-contained file."""

from __future__ import annotations

import html
from pathlib import Path

from broker.simulation.history import Event
from broker.simulation.simulator import SimulationResult

WIDTH, LEFT, ROW = 1100, 150, 26
BROKER_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f"]
FAULT_COLOURS = {"crash": "#e15759", "power-loss": "#8b0000", "disk": "#ff9da7", "partition": "#f28e2b", "client-partition": "#edc948",
                 "delay": "#76b7b2", "drop": "#b07aa1", "session-expiry": "#9c755f",
                 "controller-move": "#59a14f"}


class _Axis:
    """Simulated milliseconds to x positions."""

    def __init__(self, end_ms: int) -> None:
        self.end_ms = max(end_ms, 1)

    def x(self, at_ms: float) -> float:
        return LEFT + (WIDTH - LEFT - 10) * min(max(at_ms, 0), self.end_ms) / self.end_ms

    def ticks(self, y: float) -> str:
        step = max(1, round(self.end_ms / 1000 / 10)) * 1000
        return "".join(f'<line x1="{self.x(t):.1f}" y1="0" x2="{self.x(t):.1f}" y2="{y}" '
                       f'class="grid"/><text x="{self.x(t):.1f}" y="{y + 14}" '
                       f'class="tick">{t // 1000}s</text>'
                       for t in range(0, self.end_ms + 1, step))


def _svg(height: float, body: str, axis: _Axis, anomalies: list[int]) -> str:
    marks = "".join(f'<line x1="{axis.x(a):.1f}" y1="0" x2="{axis.x(a):.1f}" y2="{height}" '
                    f'class="anomaly"/>' for a in anomalies)
    return (f'<svg width="{WIDTH}" height="{height + 20}" xmlns="http://www.w3.org/2000/svg">'
            f"{axis.ticks(height)}{body}{marks}</svg>")


def _label(y: float, text: str) -> str:
    return f'<text x="4" y="{y + ROW / 2 + 4}" class="label">{html.escape(text)}</text>'


def _faults(result: SimulationResult, axis: _Axis) -> tuple[str, float, str]:
    brokers = sorted({f.broker for f in result.faults} | {0, 1, 2})
    body = "".join(_label(i * ROW, f"broker {b}") for i, b in enumerate(brokers))
    for event in result.history.of_kind("fault"):
        row = brokers.index(event.get("broker"))
        start = event.at_ms
        end = start + max(event.get("duration_ms"), 0)
        colour = FAULT_COLOURS.get(event.get("kind"), "#888")
        width = max(axis.x(end) - axis.x(start), 3)
        title = html.escape(f"#{event.get('number')} {event.get('kind')} at "
                            f"{start / 1000:.3f}s for {event.get('duration_ms') / 1000:g}s")
        body += (f'<rect x="{axis.x(start):.1f}" y="{row * ROW + 4}" width="{width:.1f}" '
                 f'height="{ROW - 8}" fill="{colour}" class="fault"><title>{title}</title></rect>')
    legend = "".join(f'<span class="key" style="background:{c}"></span>{k} '
                     for k, c in FAULT_COLOURS.items())
    return body, len(brokers) * ROW, legend


def _leaders(result: SimulationResult, axis: _Axis) -> tuple[str, float]:
    """Per partition, who leads (colour) and how many replicas are in the ISR (height)."""
    segments: dict[str, list[tuple[int, int, int]]] = {}  # partition -> (at, leader, isr size)
    for event in result.history.of_kind("replica"):
        if not event.get("leader"):
            continue
        rows = segments.setdefault(event.get("partition"), [])
        state = (event.at_ms, event.get("broker"), len(event.get("isr")))
        if not rows or rows[-1][1:] != state[1:]:
            rows.append(state)
    body = ""
    for i, (partition, rows) in enumerate(sorted(segments.items())):
        body += _label(i * ROW, partition)
        for j, (at, leader, isr) in enumerate(rows):
            end = rows[j + 1][0] if j + 1 < len(rows) else axis.end_ms
            height = (ROW - 8) * isr / 3
            colour = BROKER_COLOURS[leader % len(BROKER_COLOURS)]
            body += (f'<rect x="{axis.x(at):.1f}" y="{i * ROW + 4 + (ROW - 8 - height):.1f}" '
                     f'width="{max(axis.x(end) - axis.x(at), 1):.1f}" height="{height:.1f}" '
                     f'fill="{colour}"><title>leader {leader}, ISR of {isr} from '
                     f'{at / 1000:.3f}s</title></rect>')
    return body, max(len(segments), 1) * ROW


def _progress(result: SimulationResult, axis: _Axis) -> tuple[str, float]:
    height = 160.0
    series = {"acknowledged": [e for e in result.history.events if e.kind == "ack"],
              "read": [e for e in result.history.events if e.kind == "read"],
              "committed transactions": result.history.of_kind("txn-commit")}
    top = max((len(v) for v in series.values()), default=1) or 1
    body = ""
    for (name, events), colour in zip(series.items(), BROKER_COLOURS, strict=False):
        points = " ".join(f"{axis.x(e.at_ms):.1f},{height - height * n / top:.1f}"
                          for n, e in enumerate(_thin(events), 1))
        body += (f'<polyline points="{LEFT},{height} {points}" fill="none" stroke="{colour}" '
                 f'stroke-width="2"><title>{name}</title></polyline>')
    body += (f'<text x="4" y="12" class="label">{top}</text>'
             f'<text x="4" y="{height}" class="label">0</text>')
    return body, height


def _thin(events: list[Event], most: int = 600) -> list[Event]:
    step = max(1, len(events) // most)
    return events[::step]


def write_report(result: SimulationResult, path: Path) -> None:
    axis = _Axis(result.simulated_ms)
    anomalies = [a.at_ms for a in result.anomalies]
    fault_body, fault_height, legend = _faults(result, axis)
    leader_body, leader_height = _leaders(result, axis)
    progress_body, progress_height = _progress(result, axis)
    verdict = (f"{len(result.anomalies)} anomalies" if result.anomalies else "no anomaly")
    rows = "".join(f"<tr><td>{a.at_ms / 1000:.3f}s</td><td>{html.escape(a.kind)}</td>"
                   f"<td>{html.escape(a.text)}</td></tr>" for a in result.anomalies[:200])
    faults = "".join(f"<li>{html.escape(f.describe())}</li>" for f in result.faults)
    counts = ", ".join(f"{k}: {v}" for k, v in result.counts.items())
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>kafka-sim simulate, seed {result.seed}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; color: #222; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 28px; }}
.grid {{ stroke: #eee; }} .tick, .label {{ font-size: 11px; fill: #555; }}
.anomaly {{ stroke: #d00; stroke-width: 1.5; stroke-dasharray: 4 3; }}
.key {{ display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; }}
table {{ border-collapse: collapse; }} td {{ border-bottom: 1px solid #ddd; padding: 3px 8px; }}
.verdict {{ font-weight: bold; color: {"#c00" if result.anomalies else "#080"}; }}
</style></head><body>
<h1>kafka-sim simulate: seed {result.seed}</h1>
<p>digest <code id="digest">{result.digest}</code>; {result.simulated_ms / 1000:.1f} simulated
seconds in {result.real_s:.1f} s; <span class="verdict" id="verdict">{verdict}</span></p>
<p>{html.escape(counts)}</p>
<h2>Faults</h2><p>{legend}</p>
{_svg(fault_height, fault_body, axis, anomalies)}
<h2>Leaders and ISR</h2>
<p>Colour: the leader ({", ".join(f'<span class="key" style="background:{c}"></span>broker {i}'
                                   for i, c in enumerate(BROKER_COLOURS[:3]))}); height: the
ISR's size. Dashed red lines: anomalies.</p>
{_svg(leader_height, leader_body, axis, anomalies)}
<h2>Progress</h2>
<p>Cumulative writes acknowledged (blue), records read (orange), transactions committed
(green).</p>
{_svg(progress_height, progress_body, axis, anomalies)}
<h2>Anomalies</h2>
<table id="anomalies">{rows or "<tr><td>none</td></tr>"}</table>
<h2>Fault schedule</h2><ol>{faults}</ol>
</body></html>
"""
    path.write_text(page)
