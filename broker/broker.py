"""Broker: wires the listener, ReplicaManager, purgatories, timer and reaper, and runs them.

Start-up recovers the logs and becomes leader of every known partition; stop() is graceful:
it stops accepting, answers parked fetches, lets connections finish, then flushes and
checkpoints the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from broker.admin_manager import AdminManager
from broker.config import BrokerConfig, parse_listener
from broker.connection import Connection
from broker.handlers import load_handlers
from broker.replica_manager import ReplicaManager
from broker.topic_registry import TopicRegistry, load_or_create_cluster_id
from storage.log_manager import LogManager
from timer import Clock, ExpiredOperationReaper, MonotonicClock, SystemTimer

log = structlog.get_logger("kafka_sim.broker")
SHUTDOWN_GRACE_S = 5.0


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        load_handlers()
        self.config = config
        self.broker_id = config.broker_id
        self.clock = clock or MonotonicClock()
        self.timer = SystemTimer(self.clock)
        self.reaper = ExpiredOperationReaper(self.timer, self.clock)
        data_dir = config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = load_or_create_cluster_id(data_dir, self.broker_id, config["cluster.id"])
        self.registry = TopicRegistry(data_dir)
        self.log_manager = LogManager(data_dir, config.log_config(), now_ms=wall_clock_ms)
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, self.timer)
        self.admin = AdminManager(config, self.registry, self.replica_manager)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._background: list[asyncio.Task] = []
        self.address: tuple[str, int] = config.listener

    @property
    def advertised_address(self) -> tuple[str, int]:
        if self.config["advertised.listeners"]:
            return parse_listener(self.config["advertised.listeners"])
        return self.address

    @property
    def port(self) -> int:
        return self.address[1]

    async def start(self) -> None:
        self.log_manager.load()
        self.admin.load()
        self.reaper.start()
        host, port = self.config.listener
        self._server = await asyncio.start_server(self._on_connection, host, port)
        self.address = self._server.sockets[0].getsockname()[:2]
        self._background = [
            asyncio.create_task(
                self._every(self.config["log.flush.interval.ms"], self._flush_and_checkpoint)
            ),
            asyncio.create_task(
                self._every(self.config["log.retention.check.interval.ms"], self.log_manager.cleanup)
            ),
        ]
        log.info("broker started", broker_id=self.broker_id, host=self.address[0],
                 port=self.address[1], data_dir=str(self.config.data_dir),
                 cluster_id=self.cluster_id, topics=len(self.registry.topics))

    def _flush_and_checkpoint(self) -> None:
        self.log_manager.flush_all()
        self.log_manager.checkpoint()

    async def _every(self, interval_ms: int, job) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                job()
            except Exception:
                log.exception("background job failed", job=getattr(job, "__name__", str(job)))

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await Connection(self, reader, writer).serve()
        finally:
            self._connections.discard(task)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._background:
            task.cancel()
        self.replica_manager.complete_parked()
        if self._connections:
            # Parked requests have answered; give their writes a moment, then cut the rest.
            _, pending = await asyncio.wait(list(self._connections), timeout=0.05)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=SHUTDOWN_GRACE_S)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), SHUTDOWN_GRACE_S)
        await self.reaper.stop()
        self.timer.shutdown()
        self.log_manager.shutdown()
        log.info("broker stopped", broker_id=self.broker_id)

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()
