"""A broker's side of Kafka's controlled shutdown: before it stops, ask the controller (found in
its metadata cache, as Kafka's broker finds it) to move its leaderships away, retrying while
partitions remain."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker.interbroker.broker_client import BrokerClient, BrokerUnreachable
from broker.logs import get_logger
from broker.security.client_security import ClientSecurity
from protocol.errors import ErrorCode

log = get_logger("kafka_sim.controlled_shutdown")
CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION = 7, 3


async def controlled_shutdown(controller_address: Callable[[], tuple[str, int] | None],
                              broker_id: int, *, retries: int, backoff_ms: int,
                              timeout_s: float = 30.0,
                              security: ClientSecurity | None = None) -> bool:
    """True once the controller moved every leadership it could; False after `retries` tries."""
    for attempt in range(1, retries + 1):
        address = controller_address()
        if address is not None:
            client = BrokerClient(*address, client_id=f"broker-{broker_id}-shutdown",
                                  security=security)
            try:
                response = await client.request(CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION,
                                                {"broker_id": broker_id, "broker_epoch": -1},
                                                timeout_s=timeout_s)
                remaining = [(p.topic_name, p.partition_index)
                             for p in response.remaining_partitions]
                if response.error_code == ErrorCode.NONE and not remaining:
                    log.info("controlled shutdown succeeded", broker_id=broker_id)
                    return True
                log.info("controlled shutdown incomplete", broker_id=broker_id, attempt=attempt,
                         error=ErrorCode(response.error_code).name, remaining=remaining)
            except BrokerUnreachable as exc:
                log.info("controlled shutdown: controller unreachable", broker_id=broker_id,
                         attempt=attempt, reason=str(exc))
            finally:
                client.close()
        if attempt < retries:
            await asyncio.sleep(backoff_ms / 1000)
    log.warning("controlled shutdown did not complete; stopping anyway", broker_id=broker_id)
    return False
