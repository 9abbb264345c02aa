"""JoinGroup (key 11), v0-9: join (or rejoin) a classic group; parks until the rebalance completes.

- v0 has no rebalance timeout: the session timeout serves as both. v4+: a first join (empty
  member id) gets MEMBER_ID_REQUIRED with a member id to rejoin with. v5+: group.instance.id
  (static membership). v7+: protocol_type in the answer and a nullable protocol name.
- The leader's answer lists every member's metadata for the chosen protocol; others get none.
"""

from __future__ import annotations

from broker.coordinator.group.coordinator import await_callback
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode


@register(11)
async def handle(ctx: RequestContext, request) -> dict:
    version = ctx.api_version
    coordinator = ctx.services.group_coordinator
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "generation_id": -1, "protocol_type": None,
                "protocol_name": None if version >= 7 else "", "leader": "", "skip_assignment": False,
                "member_id": request.member_id, "members": []}
    session_timeout = request.session_timeout_ms
    rebalance_timeout = session_timeout if version == 0 else request.rebalance_timeout_ms
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
    result = await await_callback(lambda done: coordinator.handle_join_group(
        request.group_id, request.member_id, request.get("group_instance_id"), version >= 4,
        ctx.header.client_id or "", f"/{ctx.client_host}", rebalance_timeout, session_timeout,
        request.protocol_type, protocols, done))
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if version >= 7 else result.protocol_name or "",
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": md}
                    for m, i, md in result.members],
    }
