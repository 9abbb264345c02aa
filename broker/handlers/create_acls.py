"""CreateAcls (key 30), v0-3: store ACL bindings; each creation is answered on its own.

- SECURITY_DISABLED with no authorizer; CLUSTER_AUTHORIZATION_FAILED without ALTER on the
  cluster; INVALID_REQUEST for a binding Kafka refuses (an unknown, ANY or MATCH element, a
  principal not "Type:name", an empty name, a CLUSTER resource not named kafka-cluster).
- Stored in the metadata store before the answer; every broker's authorizer follows.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.acl_requests import NO_AUTHORIZER, binding_of
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode


def _all(request, code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": message}
                                               for _ in request.creations]}


@register(30)
async def handle(ctx: RequestContext, request) -> dict:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return _all(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return _all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = await authorizer.create_acls([binding_of(c) for c in request.creations])
    return {"throttle_time_ms": 0, "results": [
        {"error_code": ErrorCode.NONE, "error_message": None} if error is None
        else {"error_code": error.code, "error_message": error.message or None}
        for error in results]}
