"""Kafka's `sasl.jaas.config` value: `<LoginModule class> required key="value" ...;`. The broker
reads `username`/`password` (what it logs in to other brokers with) and, for PLAIN, its users as
`user_<name>="<password>"` options (Kafka's PlainLoginModule)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from broker.config import ConfigError

_ENTRY = re.compile(r'\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$', re.S)
_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


@dataclass(slots=True)
class JaasConfig:
    login_module: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>="<password>"` options."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_")}


def parse_jaas_config(text: str, name: str = "sasl.jaas.config") -> JaasConfig:
    match = _ENTRY.match(text)
    if match is None:
        raise ConfigError(f"{name}: expected '<LoginModule> required key=\"value\" ...;'")
    module, _, rest = match.groups()
    options: dict[str, str] = {}
    pos = 0
    rest = rest.rstrip().rstrip(";")
    while pos < len(rest.rstrip()):
        option = _OPTION.match(rest, pos)
        if option is None:
            raise ConfigError(f"{name}: cannot read the options from {rest[pos:pos + 30]!r}")
        key, quoted, bare = option.groups()
        options[key] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        pos = option.end()
    return JaasConfig(module, options)
