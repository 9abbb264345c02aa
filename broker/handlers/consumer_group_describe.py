"""ConsumerGroupDescribe (key 69), v0: KIP-848 groups. As a ZooKeeper-mode Kafka 3.9 broker, whose
classic group coordinator has none: every group asked for answers UNSUPPORTED_VERSION."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from protocol.errors import ErrorCode


@register(69)
async def handle(ctx: RequestContext, request) -> dict:
    return {"throttle_time_ms": 0, "groups": [
        {"error_code": ErrorCode.UNSUPPORTED_VERSION, "error_message": None, "group_id": group,
         "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
         "members": [], "authorized_operations": -2147483648}
        for group in request.group_ids]}
