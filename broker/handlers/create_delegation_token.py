"""CreateDelegationToken (key 38), v0-3: answered as a ZooKeeper-mode Kafka 3.9 broker without a
token secret answers it (kafka-sim keeps no delegation tokens).

- In Kafka's order: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on PLAINTEXT and 1-way SSL; with an
  authorizer, DELEGATION_TOKEN_AUTHORIZATION_FAILED for an owner other than the requester
  without CREATE_TOKENS on that user; INVALID_PRINCIPAL_TYPE for a renewer that is not a User;
  then DELEGATION_TOKEN_AUTH_DISABLED. The answer names the owner (v3+: and the requester).
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.delegation_tokens import first_error, requests_allowed, split_principal
from protocol.errors import ErrorCode


@register(38)
async def handle(ctx: RequestContext, request) -> dict:
    requester = split_principal(ctx.principal)
    owner_name, owner_type = request.get("owner_principal_name"), request.get("owner_principal_type")
    owner = (owner_type, owner_name) if owner_name and owner_type is not None else requester
    if owner_name and owner_type is None:  # Kafka's KafkaPrincipal refuses a null type
        error = ErrorCode.UNKNOWN_SERVER_ERROR
    elif not requests_allowed(ctx):
        error = first_error(ctx)
    elif owner != requester and not authorize(ctx, AclOperation.CREATE_TOKENS, ResourceType.USER,
                                              f"{owner[0]}:{owner[1]}"):
        error = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    elif any(r.principal_type != "User" for r in request.renewers):
        error = ErrorCode.INVALID_PRINCIPAL_TYPE
    else:
        error = first_error(ctx)
    return {"error_code": error, "principal_type": owner[0], "principal_name": owner[1],
            "token_requester_principal_type": requester[0],
            "token_requester_principal_name": requester[1],
            "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1, "max_timestamp_ms": -1,
            "token_id": "", "hmac": b"", "throttle_time_ms": 0}
