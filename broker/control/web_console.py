"""The web console under /console/ on the control API's server: one HTML page per view of the
cluster, its script and stylesheet, and a server-sent event stream of JSON snapshots each second.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web

from broker.control.control_api import CONSOLE_ENTRY, CONTROL_KEY, GUARD_KEY, ClusterControl

SNAPSHOT_INTERVAL_S = 1.0
# A snapshot is built on the brokers' loop: with many partitions it is spaced out so that the
# console takes at most about a tenth of the loop.
MAX_LOOP_SHARE = 0.1
STATIC_TYPES = {"console.js": "text/javascript", "console.css": "text/css"}


@dataclass(frozen=True, slots=True)
class Page:
    slug: str  # the path under /console/ ("" for the entry page)
    name: str  # what the script draws (body's data-page)
    title: str
    sections: tuple[str, ...]  # what its snapshots carry beside the brokers


PAGES = (
    Page("", "cluster", "Cluster", ("event_loop", "faults")),
    Page("partitions", "partitions", "Topics & partitions", ("partitions",)),
    Page("purgatory", "purgatory", "Purgatories", ("purgatory",)),
    Page("timer", "timer", "Timing wheel", ("purgatory",)),
    Page("groups", "groups", "Groups", ("groups",)),
    Page("transactions", "transactions", "Transactions", ("transactions",)),
)
PAGES_BY_NAME = {page.name: page for page in PAGES}

# Each section of a snapshot and how the cluster gives it (the control API's JSON routes' data);
# the partitions page may name one topic.
SECTIONS: dict[str, Callable[[ClusterControl, str | None], Any]] = {
    "brokers": lambda control, _: control.brokers_info(),
    "faults": lambda control, _: [fault.to_dict() for fault in control.faults.list()],
    "event_loop": lambda control, _: control.event_loop(),
    "partitions": lambda control, topic: control.partitions(topic),
    "purgatory": lambda control, _: control.purgatory(),
    "groups": lambda control, _: control.groups(None),
    "transactions": lambda control, _: control.transactions(None),
}

# The page's own script and style only; no frames (its buttons stop brokers: no clickjacking);
# no referrer (an entry URL may carry the token).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

STOPPING_KEY = web.AppKey("console_stopping", asyncio.Event)
STATIC_KEY = web.AppKey("console_static", dict)


async def snapshot(control: ClusterControl, page: Page, topic: str | None = None
                   ) -> dict[str, Any]:
    """What one page draws: the brokers and the page's sections; a section that fails carries
    {"error": ...} so that the others still show."""
    out: dict[str, Any] = {"page": page.name, "time_ms": int(time.time() * 1000), "topic": topic}
    for name in ("brokers", *page.sections):
        try:
            section = SECTIONS[name](control, topic)
            out[name] = await section if inspect.isawaitable(section) else section
        except KeyError as exc:
            out[name] = {"error": f"not found: {exc.args[0] if exc.args else ''}"}
        except Exception as exc:  # a cluster between states: show it, keep streaming
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def _json(data: Any) -> str:
    # "<" escaped: the snapshot sits inside a <script> element of the page.
    return json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")


def render_page(page: Page, data: dict[str, Any]) -> str:
    """The page's HTML: navigation and the first snapshot, which the script draws at once and
    then replaces with each one the event stream pushes."""
    nav = "".join(
        f'<a href="{CONSOLE_ENTRY}{p.slug}"{" aria-current=page" if p is page else ""}>'
        f"{p.title.replace('&', '&amp;')}</a>" for p in PAGES)
    title = page.title.replace("&", "&amp;")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kafka-sim · {title}</title>
<link rel="stylesheet" href="{CONSOLE_ENTRY}static/console.css">
</head>
<body data-page="{page.name}" data-renders="0">
<header>
<span class="brand">kafka-sim</span>
<nav>{nav}</nav>
<span id="status" class="status">connecting…</span>
</header>
<main>
<h1>{title}</h1>
<div id="live"><noscript>The console draws its pages with JavaScript.</noscript></div>
<div id="controls"></div>
<div id="toast" role="status"></div>
</main>
<script id="snapshot" type="application/json">{_json(data)}</script>
<script src="{CONSOLE_ENTRY}static/console.js"></script>
</body>
</html>
"""


def _page_handler(page: Page):
    async def handler(request: web.Request) -> web.StreamResponse:
        if page.slug == "" and "token" in request.query:
            return _token_landing(request)
        body = render_page(page, await snapshot(request.app[CONTROL_KEY], page, _topic(request)))
        return web.Response(text=body, content_type="text/html", charset="utf-8",
                            headers=SECURITY_HEADERS)

    return handler


def _topic(request: web.Request) -> str | None:
    return request.query.get("topic") or None


def _token_landing(request: web.Request) -> web.Response:
    """The entry URL with `?token=` (the guard has checked it): keep it in a cookie the page's
    script cannot read and no other site's page can send, and drop it from the address bar."""
    response = web.Response(status=303, headers={**SECURITY_HEADERS, "Location": CONSOLE_ENTRY})
    guard = request.app[GUARD_KEY]
    if guard.token:
        response.set_cookie(guard.cookie_name, guard.token, path="/", httponly=True,
                            samesite="Strict")
    return response


async def entry_without_slash(request: web.Request) -> web.Response:
    location = CONSOLE_ENTRY + (f"?{request.query_string}" if request.query_string else "")
    return web.Response(status=303, headers={**SECURITY_HEADERS, "Location": location})


async def static_file(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    files = request.app[STATIC_KEY]
    if name not in files:
        raise web.HTTPNotFound()
    return web.Response(text=files[name], content_type=STATIC_TYPES[name], charset="utf-8",
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: a page's snapshot now and each second, until the client leaves or
    the server stops (which ends the stream at once rather than at the shutdown timeout)."""
    page = PAGES_BY_NAME.get(request.query.get("page", "cluster"))
    if page is None:
        raise web.HTTPNotFound()
    control, stopping, topic = request.app[CONTROL_KEY], request.app[STOPPING_KEY], _topic(request)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-store",
                                           "X-Content-Type-Options": "nosniff"})
    await response.prepare(request)
    try:
        await response.write(b"retry: 1000\n\n")  # EventSource reconnects after a restart
        while not stopping.is_set():
            started = time.perf_counter()
            data = _json(await snapshot(control, page, topic))
            interval = max(SNAPSHOT_INTERVAL_S, (time.perf_counter() - started) / MAX_LOOP_SHARE)
            await response.write(f"data: {data}\n\n".encode())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), interval)
    except ConnectionError:  # the browser left
        pass
    return response


async def _stop_streams(app: web.Application) -> None:
    app[STOPPING_KEY].set()


def _read_static() -> dict[str, str]:
    folder = resources.files("broker.control") / "console_static"
    return {name: (folder / name).read_text(encoding="utf-8") for name in STATIC_TYPES}


def add_routes(app: web.Application) -> None:
    """Put the console on a control API app (behind its guard, which runs for every route)."""
    app[STOPPING_KEY] = asyncio.Event()
    app[STATIC_KEY] = _read_static()
    app.on_shutdown.append(_stop_streams)
    app.router.add_get(CONSOLE_ENTRY.rstrip("/"), entry_without_slash)
    app.router.add_get(f"{CONSOLE_ENTRY}events", events)
    app.router.add_get(CONSOLE_ENTRY + "static/{name}", static_file)
    for page in PAGES:
        app.router.add_get(CONSOLE_ENTRY + page.slug, _page_handler(page))
