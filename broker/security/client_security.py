"""How this broker connects to other brokers' inter-broker listener: TLS when that listener is SSL
or SASL_SSL (trusting the trust store, presenting its own certificate), and for SASL listeners the
mechanism (`sasl.mechanism.inter.broker.protocol`) and the username and password of that
listener's JAAS config, as Kafka's inter-broker clients log in."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from broker.config import BrokerConfig, ConfigError
from broker.security.listener_security import enabled_mechanisms, jaas_config
from broker.security.sasl import MECHANISMS
from broker.security.ssl_factory import client_context


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    ssl_context: ssl.SSLContext | None = None
    mechanism: str = ""  # empty: no SASL
    username: str = ""
    password: str = ""

    @classmethod
    def inter_broker(cls, config: BrokerConfig) -> ClientSecurity | None:
        """None for a PLAINTEXT inter-broker listener (nothing to do per connection)."""
        listener = config.inter_broker_listener_name
        protocol = config.security_protocol(listener)
        if protocol == "PLAINTEXT":
            return None
        context = client_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
        if protocol in ("SSL",):
            return cls(context)
        mechanism = config["sasl.mechanism.inter.broker.protocol"].strip().upper()
        if mechanism not in MECHANISMS or mechanism not in enabled_mechanisms(config, listener):
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on "
                              f"the inter-broker listener {listener}")
        jaas = jaas_config(config, listener, mechanism)
        if jaas is None or not jaas.options.get("username") or "password" not in jaas.options:
            raise ConfigError(f"inter-broker listener {listener} uses {mechanism}: set username and "
                              f"password in listener.name.{listener.lower()}.{mechanism.lower()}"
                              ".sasl.jaas.config (what brokers log in to each other with)")
        return cls(context, mechanism, jaas.options["username"], jaas.options["password"])
