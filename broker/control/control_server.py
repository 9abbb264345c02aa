"""The control API's HTTP listener: loopback only unless asked (it can stop brokers), and aiohttp
loaded only when it starts, in a worker thread, so that `kafka-sim run` serves Kafka first.
"""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import TYPE_CHECKING

from broker import control
from broker.control.addresses import is_loopback
from broker.logs import get_logger

if TYPE_CHECKING:
    from aiohttp import web

    from broker.control import control_api
    from broker.control.control_api import ClusterControl

log = get_logger("kafka_sim.control_api")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9644


class RemoteBindRefused(ValueError):
    """The control API was asked to listen beyond loopback without allow_remote and a token."""


class ControlServer:
    """The control API's HTTP listener; `port` is the bound port once started (0 picks one)."""

    def __init__(self, control: ClusterControl, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 allow_remote: bool = False, token: str = "") -> None:
        if not is_loopback(host):
            if not allow_remote:
                raise RemoteBindRefused(
                    f"refusing to serve the control API on non-loopback address {host!r}: anyone "
                    "who reaches it can stop brokers; set control.allow.remote=true and a "
                    "control.token (-o control.token=SECRET) to do it anyway")
            if not token:
                raise RemoteBindRefused(
                    f"the control API on non-loopback address {host!r} needs a control.token "
                    "(-o control.token=SECRET; ctl --token): anyone who reaches it could stop "
                    "brokers")
        self.control = control
        self.host = host
        self.port = port
        self.token = token
        self.guard: control_api.RequestGuard | None = None  # made with the app, at start
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def console_url(self) -> str:
        return f"{self.url}/console/"

    async def start(self) -> None:
        # Importing aiohttp costs more than the rest of start-up (its client side builds two SSL
        # contexts): in a thread, the brokers' connections are served meanwhile.
        api, console = await asyncio.to_thread(_load_control_api)
        web = api.web
        # A short grace period: control requests are quick, and stopping must not hang a shutdown.
        self.guard = api.RequestGuard(self.host, self.port, self.token)
        app = api.build_app(self.control, self.guard)
        console.add_routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = self.guard.port = runner.addresses[0][1]
        log.info("control API listening", url=self.url)
        log.info(f"console at {self.console_url}")

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


def _load_control_api() -> tuple[ModuleType, ModuleType]:
    return control.control_api, control.web_console
