"""ShareAcknowledge (key 79), v1-2: a share consumer acknowledges records it acquired (accept,
release, reject, or gap), within its share session (-1 closes the session after them), without
fetching more. Refusals and errors as ShareFetch's (share_fetch.py).

- v2 (KIP-1222): Renew acknowledgements (type 4) keep records acquired under a new lock of the
  full duration, said by IsRenewAck (INVALID_REQUEST when a Renew comes without it); the answer
  carries the lock's duration."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.share_fetch import (
    check_request,
    request_error,
    share_partitions_of,
    share_response,
)
from broker.share.share_partition import AcknowledgeType
from protocol.errors import ErrorCode

RENEW = AcknowledgeType.RENEW


@register(79)
async def handle(ctx: RequestContext, request) -> dict:
    refusal = check_request(ctx, request, records=False)
    if refusal is not None:
        return refusal
    allowed, refused = share_partitions_of(ctx, request.topics)
    renew = request.get("is_renew_ack", False)
    if ctx.api_version >= 2 and not renew and any(
            RENEW in types for p in allowed for _, _, types in p.acknowledgements):
        return request_error(ErrorCode.INVALID_REQUEST, "Renew acknowledgements need "
                             "IsRenewAck", records=False)
    answer = await ctx.services.share_partition_manager.share_acknowledge(
        request.group_id, request.member_id, request.share_session_epoch, allowed,
        renew=renew)
    return share_response(ctx, answer, refused, records=False)
