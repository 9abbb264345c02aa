"""DescribeAcls (key 29), v0-3: the ACLs a filter matches, grouped by resource pattern.

- SECURITY_DISABLED with no authorizer; CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the
  cluster; INVALID_REQUEST for a filter with an unknown element. v0 filters are LITERAL.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.acl_requests import NO_AUTHORIZER, filter_of
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode


def _error(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}


@register(29)
async def handle(ctx: RequestContext, request) -> dict:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return _error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    acl_filter = filter_of(request)
    if acl_filter.has_unknown():
        return _error(ErrorCode.INVALID_REQUEST, "The filter contains an unknown element")
    by_pattern: dict = {}
    for binding in authorizer.acls(acl_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    resources = [
        {"resource_type": pattern.resource_type, "resource_name": pattern.name,
         "pattern_type": pattern.pattern_type,
         "acls": [{"principal": e.principal, "host": e.host, "operation": e.operation,
                   "permission_type": e.permission_type}
                  for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation))]}
        for pattern, entries in sorted(by_pattern.items(),
                                       key=lambda kv: (kv[0].resource_type, kv[0].pattern_type, kv[0].name))
    ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "resources": resources}
