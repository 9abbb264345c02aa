"""DeleteAcls (key 31), v0-3: delete the ACLs each filter matches, answered per filter with the
bindings it removed.

- SECURITY_DISABLED with no authorizer; CLUSTER_AUTHORIZATION_FAILED without ALTER on the
  cluster; INVALID_REQUEST for a filter with an unknown element. v0 filters are LITERAL.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.acl_requests import NO_AUTHORIZER, binding_fields, filter_of
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode, KafkaError


def _all(request, code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": code, "error_message": message, "matching_acls": []} for _ in request.filters]}


@register(31)
async def handle(ctx: RequestContext, request) -> dict:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return _all(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return _all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    filters = [filter_of(f) for f in request.filters]
    valid = [f for f in filters if not f.has_unknown()]
    try:
        deleted = iter(await authorizer.delete_acls(valid))
    except KafkaError as exc:  # the store failed to make the deletions durable
        return _all(request, exc.code, exc.message)
    results = []
    for acl_filter in filters:
        if acl_filter.has_unknown():
            results.append({"error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": "The filter contains an unknown element",
                            "matching_acls": []})
            continue
        results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.NONE, "error_message": None, **binding_fields(b)}
            for b in next(deleted)]})
    return {"throttle_time_ms": 0, "filter_results": results}
