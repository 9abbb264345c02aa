"""A synchronous Python client for the control API (stdlib urllib only), one method per route."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

DEFAULT_URL = "http://127.0.0.1:9644"
URL_ENV = "KAFKA_SIM_CONTROL_URL"
TOKEN_ENV = "KAFKA_SIM_CONTROL_TOKEN"


class ControlError(Exception):
    """The control API refused a request (status 4xx/5xx) or could not be reached (status None)."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"{status}: {message}" if status is not None else message)
        self.status = status
        self.message = message


class ControlClient:
    def __init__(self, url: str | None = None, timeout: float = 30.0,
                 token: str | None = None) -> None:
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV, "")
        self.timeout = timeout  # stopping a broker waits for its connections to close

    def brokers(self) -> list[dict]:
        return self._call("GET", "/brokers")

    def stop_broker(self, broker_id: int) -> dict:
        return self._call("POST", f"/brokers/{int(broker_id)}/stop")

    def start_broker(self, broker_id: int) -> dict:
        return self._call("POST", f"/brokers/{int(broker_id)}/start")

    def partitions(self, topic: str | None = None) -> list[dict]:
        return self._call("GET", "/partitions", query={"topic": topic})

    def pause_replication(self, broker_id: int) -> dict:
        return self._call("POST", f"/replication/{int(broker_id)}/pause")

    def resume_replication(self, broker_id: int) -> dict:
        return self._call("POST", f"/replication/{int(broker_id)}/resume")

    def clock(self) -> dict:
        """The virtual clock: frozen, now_ms, wall_ms, offset_ms, brokers."""
        return self._call("GET", "/clock")

    def freeze_clock(self) -> dict:
        return self._call("POST", "/clock/freeze")

    def advance_clock(self, ms: int) -> dict:
        """Move the cluster's time `ms` forward; what came due has run when this returns."""
        return self._call("POST", "/clock/advance", body={"ms": int(ms)})

    def resume_clock(self) -> dict:
        return self._call("POST", "/clock/resume")

    def faults(self) -> list[dict]:
        return self._call("GET", "/faults")

    def add_fault(
        self,
        broker: int,
        api: str | int,
        *,
        partition: str | tuple[str, int] | None = None,
        error: int | str | None = None,
        drop_response: bool = False,
        disconnect: bool = False,
        delay_ms: int | None = None,
        count: int | None = None,
    ) -> dict:
        """Add a fault with exactly one action; returns it as the API lists it (with its id)."""
        if isinstance(partition, tuple):
            partition = f"{partition[0]}:{partition[1]}"
        body: dict[str, Any] = {"broker": broker, "api": api, "partition": partition,
                                "count": count}
        # Only the chosen action goes on the wire, so the server sees what the caller meant.
        actions = {"error": error, "drop_response": drop_response or None,
                   "disconnect": disconnect or None, "delay_ms": delay_ms}
        body.update({k: v for k, v in actions.items() if v is not None})
        return self._call("POST", "/faults", body=body)

    def clear_faults(self, id: int | None = None, broker: int | None = None) -> int:
        """Clear one fault, a broker's faults, or all of them; returns how many were cleared."""
        return self._call("DELETE", "/faults", query={"id": id, "broker": broker})["cleared"]

    def disk_faults(self) -> list[dict]:
        return self._call("GET", "/disk-faults")

    def add_disk_fault(self, broker: int, operation: str, errno: str | int, *,
                       after_bytes: int | None = None, after_ops: int | None = None,
                       files: list[str] | None = None, log_dir: str | None = None) -> dict:
        """Make a broker's log dir (`log_dir`, or all of them) fail writes or fsyncs (after N
        more bytes or calls) of some kinds of file: log (the default), index, checkpoint, cleaner,
        or all."""
        body = {"broker": broker, "operation": operation, "errno": errno,
                "after_bytes": after_bytes, "after_ops": after_ops, "files": files,
                "log_dir": log_dir}
        return self._call("POST", "/disk-faults", body={k: v for k, v in body.items()
                                                         if v is not None})

    def clear_disk_faults(self, id: int | None = None, broker: int | None = None) -> int:
        return self._call("DELETE", "/disk-faults", query={"id": id, "broker": broker})["cleared"]

    def elect_preferred_leaders(self) -> list[dict]:
        """Preferred-replica election; returns the partitions afterwards."""
        return self._call("POST", "/leaders/preferred")

    def purgatory(self) -> dict:
        return self._call("GET", "/purgatory")

    def groups(self, group: str | None = None) -> list[dict]:
        return self._call("GET", "/groups", query={"group": group})

    def transactions(self, transactional_id: str | None = None) -> list[dict]:
        return self._call("GET", "/transactions", query={"id": transactional_id})

    def users(self, user: str | None = None) -> list[dict]:
        return self._call("GET", "/users", query={"user": user})

    def set_user(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                 iterations: int = 4096) -> dict:
        return self._call("POST", "/users", body={"user": user, "password": password,
                                                  "mechanism": mechanism, "iterations": iterations})

    def delete_user(self, user: str, mechanism: str = "SCRAM-SHA-256") -> dict:
        return self._call("DELETE", "/users", query={"user": user, "mechanism": mechanism})

    def _call(self, method: str, path: str, *, body: dict | None = None,
              query: dict[str, Any] | None = None) -> Any:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        data = json.dumps(body).encode() if body is not None else None
        # The API takes state changes as JSON only (what a web page cannot send it unasked).
        headers = {"Content-Type": "application/json"} if method != "GET" else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ControlError(exc.code, _error_message(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            message = f"cannot reach the control API at {self.url}: {reason}"
            raise ControlError(None, message) from None


def _error_message(exc: urllib.error.HTTPError) -> str:
    raw = exc.read()
    try:
        return json.loads(raw)["error"]
    except (ValueError, KeyError, TypeError):
        return raw.decode(errors="replace").strip() or exc.reason
