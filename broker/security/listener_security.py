"""What a listener's security protocol asks of its connections, built once at start-up (every
setting checked then, one line per problem): the TLS context of SSL and SASL_SSL listeners, and
for SASL listeners the enabled mechanisms, PLAIN's users and where SCRAM credentials live."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker import security
from broker.config import BrokerConfig, ConfigError
from broker.metadata.store import MetadataStore
from broker.security.sasl import MECHANISMS, PLAIN, SaslServer
from broker.security.scram_credentials import ScramCredentialStore
from timer import Clock, FunctionTimerTask, SystemTimer

if TYPE_CHECKING:
    from broker.security.jaas import JaasConfig


def jaas_config(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    """Kafka's `listener.name.<listener>.<mechanism>.sasl.jaas.config`, parsed."""
    name = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_props.get(name)
    return security.jaas.parse_jaas_config(text, name) if text else None


def enabled_mechanisms(config: BrokerConfig, listener: str) -> list[str]:
    names = [m.strip().upper() for m in
             config.for_listener(listener, "sasl.enabled.mechanisms").split(",") if m.strip()]
    unknown = [m for m in names if m not in MECHANISMS]
    if unknown:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms has {', '.join(unknown)} "
                          f"(supported: {', '.join(MECHANISMS)})")
    if not names:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    return names


@dataclass(slots=True)
class ListenerSecurity:
    """A listener's security: TLS context, SASL mechanisms and their users."""
    listener: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: list[str] = field(default_factory=list)  # empty: no SASL on this listener
    plain_users: dict[str, str] = field(default_factory=dict)
    credentials: ScramCredentialStore | None = None
    max_receive_size: int = 524288
    failed_authentication_delay_s: float = 0.1
    max_reauth_ms: int = 0
    # The broker's clock and timer: sessions expire and failed logins wait on them (manual in tests)
    clock: Clock | None = None
    timer: SystemTimer | None = None

    @property
    def sasl(self) -> bool:
        return bool(self.mechanisms)

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str, store: MetadataStore,
                    clock: Clock | None = None, timer: SystemTimer | None = None) -> ListenerSecurity:
        protocol = config.security_protocol(listener)
        result = cls(listener, protocol, clock=clock, timer=timer)
        if protocol in ("SSL", "SASL_SSL"):
            result.ssl_context = security.ssl_factory.server_context(config, listener)
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            result.mechanisms = enabled_mechanisms(config, listener)
            if PLAIN in result.mechanisms:
                jaas = jaas_config(config, listener, PLAIN)
                if jaas is None or not jaas.plain_users:
                    raise ConfigError(
                        f"listener {listener} enables PLAIN: set listener.name.{listener.lower()}"
                        ".plain.sasl.jaas.config to 'org.apache.kafka.common.security.plain."
                        'PlainLoginModule required user_<name>="<password>" ...;\' (or leave PLAIN '
                        "out of sasl.enabled.mechanisms)")
                result.plain_users = jaas.plain_users
            result.credentials = ScramCredentialStore(store)
            result.max_receive_size = int(config.for_listener(listener, "sasl.server.max.receive.size"))
            result.failed_authentication_delay_s = \
                config["connection.failed.authentication.delay.ms"] / 1000
            result.max_reauth_ms = int(config.for_listener(listener, "connections.max.reauth.ms"))
        return result

    def now_ms(self) -> int:
        assert self.clock is not None
        return self.clock.now_ms()

    async def failed_authentication_delay(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms, on the broker's timer."""
        delay_ms = round(self.failed_authentication_delay_s * 1000)
        if delay_ms <= 0:
            return
        if self.timer is None:
            await asyncio.sleep(delay_ms / 1000)
            return
        done = asyncio.get_running_loop().create_future()
        self.timer.add(FunctionTimerTask(delay_ms, lambda: done.done() or done.set_result(None)))
        await done

    def sasl_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return security.plain.PlainServer(self.plain_users)
        assert self.credentials is not None
        return security.scram.ScramServer(mechanism, self.credentials.credential)
