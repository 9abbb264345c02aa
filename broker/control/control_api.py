"""The control API: HTTP JSON routes over a `ClusterControl` (stop/start brokers, pause replication,
inject faults, inspect partitions and purgatories), behind a `RequestGuard` so that no web page
can drive it; control_server.py is its listener.
"""

from __future__ import annotations

import hmac
import json
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from broker import control
from broker.control.addresses import is_loopback, is_wildcard
from broker.control.faults import FaultInjector
from broker.logs import get_logger

log = get_logger("kafka_sim.control_api")

FAULT_FIELDS = frozenset({"broker", "api", "partition", "error", "drop_response", "disconnect",
                          "delay_ms", "count"})
DISK_FAULT_FIELDS = frozenset({"broker", "operation", "errno", "after_bytes", "after_ops", "files",
                               "log_dir"})


class ClusterControl(Protocol):
    """What the control API needs from a cluster. Conventions for every broker-id method: KeyError
    for an unknown broker id (-> 404), ValueError for a state conflict such as stopping a stopped
    broker (-> 409)."""

    @property
    def faults(self) -> FaultInjector: ...

    async def brokers_info(self) -> list[dict]:
        """One dict per broker: id, host, port, alive, controller (bool), controller_epoch."""
        ...

    def add_disk_fault(self, broker_id: int, operation: str, errno: int | str, *,
                       after_bytes: int | None = None, after_ops: int | None = None,
                       files: list[str] | None = None, log_dir: str | None = None) -> dict:
        """Arm a fault on one of a broker's log dirs (all of them when None; ValueError for a bad
        spec or a dir it does not have) for some kinds of its files (log, index, checkpoint,
        cleaner, or all; segment files when None); returns it as listed: id, broker, operation,
        errno, after_bytes, after_ops, hits, files (and log_dir when given)."""
        ...

    def disk_faults(self) -> list[dict]: ...

    def clear_disk_faults(self, fault_id: int | None, broker_id: int | None) -> int: ...

    async def stop_broker(self, broker_id: int) -> None: ...

    async def start_broker(self, broker_id: int) -> None: ...

    async def partitions(self, topic: str | None) -> list[dict]:
        """Per partition: topic, partition, leader, leader_epoch, isr, replicas, replicas_state
        (a list of {broker, log_end_offset, high_watermark, lag}). KeyError for an unknown topic."""
        ...

    def pause_replication(self, broker_id: int) -> None: ...

    def clock_state(self) -> dict:
        """The virtual clock: frozen, now_ms, wall_ms, offset_ms (ahead of real time), brokers
        (those following it); ValueError when the cluster's clock cannot be driven."""
        ...

    def freeze_clock(self) -> dict: ...

    def advance_clock(self, ms: int) -> dict:
        """Move the clock forward and run the timer tasks that came due before returning."""
        ...

    def resume_clock(self) -> dict: ...

    def resume_replication(self, broker_id: int) -> None: ...

    async def elect_preferred_leaders(self) -> None: ...

    def purgatory(self) -> dict:
        """Per broker and purgatory: watched keys, delayed, completed, expired; the timer's pending
        tasks and occupied buckets per wheel level."""
        ...

    def metrics(self) -> dict:
        """{"brokers": {id: KafkaServer.metrics() of each running broker}, "timer": the timer's
        stats, "event_loop": event_loop()} for `GET /metrics`."""
        ...

    def event_loop(self) -> dict:
        """The process's event loop over the last minute: lag_max_ms, lag_p99_ms (how late a
        100 ms tick ran), samples, held_warnings (steps that held it over a second)."""
        ...

    def groups(self, group: str | None) -> list[dict]:
        """Per consumer group: group, coordinator, state, generation, protocol_type, protocol,
        leader, members (member_id, client_id, client_host, assignment), offsets (topic,
        partition, committed_offset, high_watermark, lag). KeyError for an unknown group."""
        ...

    @property
    def scram_credentials(self) -> Any:
        """broker.security's ScramCredentialStore: describe(user), set_password(user, mechanism,
        password, iterations) (async), delete(user, mechanism); KeyError/ValueError as above."""
        ...

    def transactions(self, transactional_id: str | None) -> list[dict]:
        """Per transactional id: transactional_id, coordinator, state, pending_state,
        producer_id, producer_epoch, timeout_ms, start_timestamp, last_update_timestamp,
        partitions (topic, partition). KeyError for an unknown id."""
        ...


class ApiError(Exception):
    """A request the API refuses, answered with `status` and {"error": message}."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- who may call ---------------------------------------------------------------------------------

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CONSOLE_ENTRY = "/console/"  # the web console's entry URL, the one that may carry `?token=`


@dataclass(slots=True)
class RequestGuard:
    """What a request shows before any route runs. A browser lets any page send "simple" requests
    (a POST of text/plain, no preflight) to 127.0.0.1, and DNS rebinding lets a page read answers
    under its own host name: so the Host must name the address the API is bound to, an Origin (a
    browser's) must be the API's own, a state-changing request must be application/json (which a
    browser only sends cross-origin after a CORS preflight this API never grants), and with a
    token, every request carries it as `Authorization: Bearer` (or the console's cookie)."""

    host: str
    port: int
    token: str = ""
    refused: int = 0

    def check(self, request: web.Request) -> None:
        try:
            self._check(request)
        except ApiError as exc:
            self.refused += 1
            log.warning("control request refused", method=request.method, path=request.path,
                        reason=exc.message)
            raise

    def _check(self, request: web.Request) -> None:
        if not is_wildcard(self.host):  # bound to every address: any name may reach it
            self._check_host(request.host)
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() != f"http://{request.host}".lower():
            raise ApiError(403, f"cross-origin request from {origin!r} refused")
        if self.token and not hmac.compare_digest(
            self._presented_token(request).encode(), self.token.encode()
        ):
            raise ApiError(401, "missing or wrong control token (ctl --token, or "
                                "KAFKA_SIM_CONTROL_TOKEN; the console: open "
                                f"{CONSOLE_ENTRY}?token=...)")
        if request.method in STATE_CHANGING and request.content_type != "application/json":
            raise ApiError(415, f"{request.method} requests must be application/json, "
                                f"not {request.content_type}")

    def _presented_token(self, request: web.Request) -> str:
        """`Authorization: Bearer`, else the console's cookie (set by its entry URL from one
        `?token=`). SameSite=Strict keeps other sites' pages from sending it; pages on other
        ports of this host are the same site, and the Origin check above refuses those."""
        authorization = request.headers.get("Authorization", "")
        if authorization.startswith("Bearer "):
            return authorization.removeprefix("Bearer ")
        if (request.method == "GET" and request.path.rstrip("/") == CONSOLE_ENTRY.rstrip("/")
                and "token" in request.query):
            return request.query["token"]
        return request.cookies.get(self.cookie_name, "")

    @property
    def cookie_name(self) -> str:
        # Cookies are shared by every port of a host: one name per API, so two clusters coexist.
        return f"kafka-sim-control-token-{self.port}"

    def _check_host(self, header: str | None) -> None:
        try:
            url = urllib.parse.urlsplit(f"//{header or ''}")
            name, port = url.hostname, url.port or 80
        except ValueError:
            name, port = None, None
        names = {self.host.lower()}
        if is_loopback(self.host):
            names |= {"localhost", "127.0.0.1", "::1"}
        if name not in names or port != self.port:
            raise ApiError(403, f"Host {header!r} is not this control API's address "
                                f"({self.host}:{self.port})")


# --- routes --------------------------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CONTROL_KEY = web.AppKey("control", ClusterControl)
GUARD_KEY = web.AppKey("guard", RequestGuard)


def _control(request: web.Request) -> ClusterControl:
    return request.app[CONTROL_KEY]


def _ok(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def _int(text: str | None, what: str) -> int:
    try:
        return int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ApiError(400, f"{what} must be an integer, not {text!r}") from None


def _broker_id(request: web.Request) -> int:
    return _int(request.match_info["id"], "broker id")


async def _guarded(call: Callable[[], Any], what: str = "broker") -> Any:
    """Run a cluster call, turning its KeyError/ValueError conventions into 404/409."""
    try:
        result = call()
        if isinstance(result, Awaitable):
            result = await result
        return result
    except KeyError as exc:
        raise ApiError(404, _key_message(exc, what)) from None
    except ValueError as exc:
        raise ApiError(409, str(exc)) from None


def _key_message(exc: KeyError, what: str) -> str:
    # str(KeyError("x")) quotes its argument: a message is shown bare, a bare key gets words.
    arg = exc.args[0] if exc.args else None
    return arg if isinstance(arg, str) and " " in arg else f"unknown {what} {arg}"


async def _json_body(request: web.Request) -> dict:
    raw = await request.read()
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


async def get_index(request: web.Request) -> web.Response:
    return _ok({"routes": [f"{method} {path}" for method, path, _ in ROUTES]})


async def get_brokers(request: web.Request) -> web.Response:
    return _ok(await _control(request).brokers_info())


async def _broker_entry(control: ClusterControl, broker_id: int) -> dict:
    found = [b for b in await control.brokers_info() if b.get("id") == broker_id]
    return found[0] if found else {"id": broker_id}


async def stop_broker(request: web.Request) -> web.Response:
    control, broker_id = _control(request), _broker_id(request)
    await _guarded(lambda: control.stop_broker(broker_id))
    return _ok(await _broker_entry(control, broker_id))


async def start_broker(request: web.Request) -> web.Response:
    control, broker_id = _control(request), _broker_id(request)
    await _guarded(lambda: control.start_broker(broker_id))
    return _ok(await _broker_entry(control, broker_id))


async def get_partitions(request: web.Request) -> web.Response:
    topic = request.query.get("topic")
    if topic == "":
        raise ApiError(400, "topic must not be empty")
    control = _control(request)
    return _ok(await _guarded(lambda: control.partitions(topic), "topic"))


async def pause_replication(request: web.Request) -> web.Response:
    control, broker_id = _control(request), _broker_id(request)
    await _guarded(lambda: control.pause_replication(broker_id))
    return _ok({"broker": broker_id, "replication": "paused"})


async def elect_preferred_leaders(request: web.Request) -> web.Response:
    control = _control(request)
    await _guarded(control.elect_preferred_leaders)
    return _ok(await control.partitions(None))


async def resume_replication(request: web.Request) -> web.Response:
    control, broker_id = _control(request), _broker_id(request)
    await _guarded(lambda: control.resume_replication(broker_id))
    return _ok({"broker": broker_id, "replication": "running"})


# A century per call: broker timestamps stay far inside Kafka's int64 milliseconds.
MAX_ADVANCE_MS = 100 * 365 * 24 * 3600 * 1000


async def get_clock(request: web.Request) -> web.Response:
    control = _control(request)
    return _ok(await _guarded(control.clock_state))


async def freeze_clock(request: web.Request) -> web.Response:
    control = _control(request)
    return _ok(await _guarded(control.freeze_clock))


async def resume_clock(request: web.Request) -> web.Response:
    control = _control(request)
    return _ok(await _guarded(control.resume_clock))


async def advance_clock(request: web.Request) -> web.Response:
    body = await _json_body(request)
    ms = body.get("ms")
    if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms <= MAX_ADVANCE_MS:
        raise ApiError(400, f"ms must be an integer from 0 to {MAX_ADVANCE_MS}, not {ms!r}")
    control = _control(request)
    return _ok(await _guarded(lambda: control.advance_clock(ms)))


async def get_faults(request: web.Request) -> web.Response:
    return _ok([f.to_dict() for f in _control(request).faults.list()])


async def _fault_body(request: web.Request, kind: str, fields: frozenset[str],
                      required: tuple[str, ...]) -> dict:
    """A fault's JSON body: only known fields, the required ones present."""
    body = await _json_body(request)
    unknown = sorted(set(body) - fields)
    if unknown:
        raise ApiError(400, f"unknown {kind} field(s): {', '.join(unknown)} "
                            f"(known: {', '.join(sorted(fields))})")
    for name in required:
        if body.get(name) is None:
            raise ApiError(400, f"a {kind} needs '{name}'")
    return body


def _body_broker(body: dict) -> int:
    broker_id = body["broker"]
    if not isinstance(broker_id, int) or isinstance(broker_id, bool):
        raise ApiError(400, f"broker must be an integer id, not {broker_id!r}")
    return broker_id


def _clear_query(request: web.Request) -> tuple[int | None, int | None]:
    """DELETE's `id` and `broker` query parameters (either may be absent)."""
    query = request.query
    fault_id = _int(query["id"], "fault id") if "id" in query else None
    broker_id = _int(query["broker"], "broker") if "broker" in query else None
    return fault_id, broker_id


async def add_fault(request: web.Request) -> web.Response:
    body = await _fault_body(request, "fault", FAULT_FIELDS, ("broker", "api"))
    for flag in ("drop_response", "disconnect"):
        if not isinstance(body.get(flag, False), bool):
            raise ApiError(400, f"{flag} must be true or false")
    control = _control(request)
    broker_id = _body_broker(body)
    if broker_id not in {b.get("id") for b in await control.brokers_info()}:
        raise ApiError(404, f"unknown broker {broker_id}")
    try:
        fault = control.faults.add(
            broker_id, body["api"], partition=body.get("partition"), error=body.get("error"),
            drop_response=body.get("drop_response", False),
            disconnect=body.get("disconnect", False), delay_ms=body.get("delay_ms"),
            count=body.get("count"),
        )
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    log.info("fault added", **fault.to_dict())
    return _ok(fault.to_dict(), status=201)


async def clear_faults(request: web.Request) -> web.Response:
    fault_id, broker_id = _clear_query(request)
    cleared = _control(request).faults.clear(fault_id, broker_id)
    if fault_id is not None and cleared == 0:
        raise ApiError(404, f"no fault with id {fault_id}")
    return _ok({"cleared": cleared})


async def get_disk_faults(request: web.Request) -> web.Response:
    return _ok(_control(request).disk_faults())


async def add_disk_fault(request: web.Request) -> web.Response:
    body = await _fault_body(request, "disk fault", DISK_FAULT_FIELDS,
                             ("broker", "operation", "errno"))
    broker_id = _body_broker(body)
    control = _control(request)
    try:
        fault = control.add_disk_fault(broker_id, body["operation"], body["errno"],
                                       after_bytes=body.get("after_bytes"),
                                       after_ops=body.get("after_ops"),
                                       files=body.get("files"), log_dir=body.get("log_dir"))
    except KeyError as exc:
        raise ApiError(404, _key_message(exc, "broker")) from None
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    log.info("disk fault added", **fault)
    return _ok(fault, status=201)


async def clear_disk_faults(request: web.Request) -> web.Response:
    fault_id, broker_id = _clear_query(request)
    cleared = _control(request).clear_disk_faults(fault_id, broker_id)
    if fault_id is not None and cleared == 0:
        raise ApiError(404, f"no disk fault with id {fault_id}")
    return _ok({"cleared": cleared})


async def get_purgatory(request: web.Request) -> web.Response:
    return _ok(_control(request).purgatory())


async def get_metrics(request: web.Request) -> web.Response:
    # prometheus_client is loaded by the first scrape, not with the control API (start-up).
    rendering = control.prometheus_metrics
    body = rendering.render(_control(request).metrics())
    return web.Response(body=body, headers={"Content-Type": rendering.CONTENT_TYPE_LATEST})


async def get_groups(request: web.Request) -> web.Response:
    group = request.query.get("group")
    if group == "":
        raise ApiError(400, "group must not be empty")
    control = _control(request)
    return _ok(await _guarded(lambda: control.groups(group), "group"))


async def get_transactions(request: web.Request) -> web.Response:
    transactional_id = request.query.get("id")
    if transactional_id == "":
        raise ApiError(400, "id must not be empty")
    control = _control(request)
    return _ok(await _guarded(lambda: control.transactions(transactional_id), "transactional id"))


async def get_users(request: web.Request) -> web.Response:
    user = request.query.get("user")
    if user == "":
        raise ApiError(400, "user must not be empty")
    control = _control(request)
    return _ok(await _guarded(lambda: control.scram_credentials.describe(user), "user"))


async def set_user(request: web.Request) -> web.Response:
    body = await _fault_body(request, "user", frozenset({"user", "password", "mechanism",
                                                         "iterations"}), ("user", "password"))
    iterations = body.get("iterations", 4096)
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise ApiError(400, "iterations must be an integer")
    control = _control(request)
    try:
        user = await control.scram_credentials.set_password(
            str(body["user"]), str(body.get("mechanism", "SCRAM-SHA-256")), str(body["password"]),
            iterations)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    log.info("SCRAM credential set", user=user["user"], mechanisms=user["mechanisms"])
    return _ok(user, status=201)


async def delete_user(request: web.Request) -> web.Response:
    user, mechanism = request.query.get("user"), request.query.get("mechanism", "SCRAM-SHA-256")
    if not user:
        raise ApiError(400, "user is required")
    control = _control(request)
    await _guarded(lambda: control.scram_credentials.delete(user, mechanism), "user")
    return _ok({"user": user, "deleted": mechanism})


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/", get_index),
    ("GET", "/brokers", get_brokers),
    ("POST", "/brokers/{id}/stop", stop_broker),
    ("POST", "/brokers/{id}/start", start_broker),
    ("GET", "/partitions", get_partitions),
    ("POST", "/replication/{id}/pause", pause_replication),
    ("POST", "/replication/{id}/resume", resume_replication),
    ("POST", "/leaders/preferred", elect_preferred_leaders),
    ("GET", "/clock", get_clock),
    ("POST", "/clock/freeze", freeze_clock),
    ("POST", "/clock/advance", advance_clock),
    ("POST", "/clock/resume", resume_clock),
    ("GET", "/faults", get_faults),
    ("POST", "/faults", add_fault),
    ("DELETE", "/faults", clear_faults),
    ("GET", "/disk-faults", get_disk_faults),
    ("POST", "/disk-faults", add_disk_fault),
    ("DELETE", "/disk-faults", clear_disk_faults),
    ("GET", "/purgatory", get_purgatory),
    ("GET", "/metrics", get_metrics),
    ("GET", "/groups", get_groups),
    ("GET", "/transactions", get_transactions),
    ("GET", "/users", get_users),
    ("POST", "/users", set_user),
    ("DELETE", "/users", delete_user),
]


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The guard first; every failure is JSON {"error": message}; bad input never becomes a 500."""
    try:
        request.app[GUARD_KEY].check(request)
        return await handler(request)
    except ApiError as exc:
        status, message = exc.status, exc.message
    except web.HTTPException as exc:  # the router's 404 and 405
        status = exc.status
        message = {404: f"no route {request.method} {request.path}",
                   405: f"method {request.method} not allowed on {request.path}"}.get(
                       status, exc.reason)
    except Exception as exc:  # a bug in the cluster or here: say so, keep serving
        log.exception("control request failed", method=request.method, path=request.path)
        status, message = 500, f"internal error: {type(exc).__name__}: {exc}"
    return _ok({"error": message}, status=status)


def build_app(control: ClusterControl, guard: RequestGuard) -> web.Application:
    app = web.Application(middlewares=[json_errors])
    app[CONTROL_KEY] = control
    app[GUARD_KEY] = guard
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app
