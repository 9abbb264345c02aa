"""DescribeUserScramCredentials (key 50), v0 (KIP-554): each user's SCRAM mechanisms and iteration
counts — never salts or keys. No users listed (null or empty): every user that has credentials.

- A user without credentials: RESOURCE_NOT_FOUND; a user listed twice: DUPLICATE_RESOURCE for it.
- With an authorizer: CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster, as Kafka.
"""

from __future__ import annotations

from collections import Counter

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from broker.security.sasl import SCRAM_SHA_256, SCRAM_SHA_512
from protocol.errors import ErrorCode

MECHANISM_IDS = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}  # Kafka's ScramMechanism types


@register(50)
async def handle(ctx: RequestContext, request) -> dict:
    store = ctx.services.scram_credentials
    assert store is not None
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": []}
    names = [u.name for u in request.users] if request.users else await store.users()
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        result = {"user": name, "error_code": ErrorCode.NONE, "error_message": None,
                  "credential_infos": []}
        if counts[name] > 1:
            result.update(error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=(
                "Cannot describe SCRAM credentials for the same user twice in a single request"))
        else:
            mechanisms = await store.mechanisms(name)
            if not mechanisms:
                if request.users:  # listed by name; among "all users" only those with some count
                    result.update(error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                  error_message="Attempt to describe a user credential that does "
                                                "not exist")
                    results.append(result)
                continue
            result["credential_infos"] = [{"mechanism": MECHANISM_IDS[m], "iterations": n}
                                          for m, n in mechanisms.items()]
        results.append(result)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "results": results}
