"""ShareAcknowledge (key 79), v1: a share consumer acknowledges records it acquired (accept,
release, reject, or gap), within its share session (-1 closes the session after them), without
fetching more. Refusals and errors as ShareFetch's (share_fetch.py)."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.share_fetch import check_request, share_partitions_of, share_response


@register(79)
async def handle(ctx: RequestContext, request) -> dict:
    refusal = check_request(ctx, request, records=False)
    if refusal is not None:
        return refusal
    allowed, refused = share_partitions_of(ctx, request.topics)
    answer = await ctx.services.share_partition_manager.share_acknowledge(
        request.group_id, request.member_id, request.share_session_epoch, allowed)
    return share_response(ctx, answer, refused, records=False)
