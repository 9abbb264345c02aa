"""AlterUserScramCredentials (key 51), v0 (KIP-554): upsert credentials from the client's salt and
salted password (the password itself never travels), or delete them; stored as Kafka stores them.

- One result per user; a user altered twice in one request: DUPLICATE_RESOURCE for it; an empty
  name or iterations outside 4096-16384: UNACCEPTABLE_CREDENTIAL; an unknown mechanism:
  UNSUPPORTED_SASL_MECHANISM; deleting what does not exist: RESOURCE_NOT_FOUND.
- With an authorizer: every user CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster.
"""

from __future__ import annotations

from collections import Counter

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from broker.security.sasl import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_SHA_256, SCRAM_SHA_512
from broker.security.scram import credential_from_salted
from broker.security.scram_credentials import acceptable_user
from protocol.errors import ErrorCode

MECHANISMS = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}


def _problem(name: str, mechanism: int, iterations: int | None = None) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if not acceptable_user(name):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username {name!r} is not allowed"
    if mechanism not in MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


@register(51)
async def handle(ctx: RequestContext, request) -> dict:
    store = ctx.services.scram_credentials
    assert store is not None
    counts = Counter([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return {"throttle_time_ms": 0, "results": [
            {"user": name, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": None} for name in counts]}
    errors: dict[str, tuple[int, str | None]] = {}
    for name, count in counts.items():
        if count > 1:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request")
    for d in request.deletions:
        problem = errors.get(d.name) or _problem(d.name, d.mechanism)
        if problem is None and MECHANISMS[d.mechanism] not in await store.mechanisms(d.name):
            problem = (ErrorCode.RESOURCE_NOT_FOUND,
                       "Attempt to delete a user credential that does not exist")
        if problem is None:
            await store.set(d.name, MECHANISMS[d.mechanism], None)
        errors.setdefault(d.name, problem or (ErrorCode.NONE, None))
    for u in request.upsertions:
        problem = errors.get(u.name) or _problem(u.name, u.mechanism, u.iterations)
        if problem is None:
            mechanism = MECHANISMS[u.mechanism]
            await store.set(u.name, mechanism, credential_from_salted(
                mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations))
        errors.setdefault(u.name, problem or (ErrorCode.NONE, None))
    return {"throttle_time_ms": 0, "results": [
        {"user": name, "error_code": code, "error_message": message}
        for name, (code, message) in errors.items()]}
