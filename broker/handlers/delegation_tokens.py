"""What the four delegation token APIs share: Kafka's allowTokenRequests and the ZooKeeper-mode
answer of a broker without `delegation.token.secret.key` (kafka-sim keeps no tokens)."""

from __future__ import annotations

from broker.handlers import RequestContext
from protocol.errors import ErrorCode

# No token secret here: Kafka's token manager answers this once the request is allowed.
TOKENS_DISABLED = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
ANONYMOUS = "User:ANONYMOUS"


def requests_allowed(ctx: RequestContext) -> bool:
    """Kafka's allowTokenRequests: never on PLAINTEXT, nor on SSL without a client certificate
    (1-way SSL: the principal is ANONYMOUS); no connection here is token-authenticated."""
    protocol = ctx.services.config.security_protocol(ctx.listener)
    return not (protocol == "PLAINTEXT" or (protocol == "SSL" and ctx.principal == ANONYMOUS))


def first_error(ctx: RequestContext) -> ErrorCode:
    return TOKENS_DISABLED if requests_allowed(ctx) else ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def split_principal(principal: str) -> tuple[str, str]:
    """"User:alice" -> ("User", "alice"), as KafkaPrincipal prints and parses."""
    kind, _, name = principal.partition(":")
    return kind, name
