"""The control API's HTTP listener: loopback only unless asked (it can stop brokers), and aiohttp
loaded only when it starts, in a worker thread, so that `kafka-sim run` serves Kafka first.
"""

from __future__ import annotations

import asyncio
import ipaddress
from types import ModuleType
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from aiohttp import web

    from broker.control.control_api import ClusterControl

log = structlog.get_logger("kafka_sim.control_api")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9644


class RemoteBindRefused(ValueError):
    """The control API was asked to listen beyond loopback without allow_remote."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


class ControlServer:
    """The control API's HTTP listener; `port` is the bound port once started (0 picks one)."""

    def __init__(self, control: ClusterControl, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 allow_remote: bool = False) -> None:
        if not allow_remote and not is_loopback(host):
            raise RemoteBindRefused(
                f"refusing to serve the control API on non-loopback address {host!r}: anyone "
                "who reaches it can stop brokers; pass allow_remote=True to do it anyway")
        self.control = control
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        # Importing aiohttp costs more than the rest of start-up (its client side builds two SSL
        # contexts): in a thread, the brokers' connections are served meanwhile.
        api = await asyncio.to_thread(_load_control_api)
        web = api.web
        # A short grace period: control requests are quick, and stopping must not hang a shutdown.
        runner = web.AppRunner(api.build_app(self.control), access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("control API listening", url=self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


def _load_control_api() -> ModuleType:
    from broker.control import control_api

    return control_api
