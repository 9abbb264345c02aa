"""Produce (key 0), v3-11: append record batches, answer per partition.

- v3 is the first version carrying magic-2 batches only; Kafka 4 serves 3+ too.
- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every partition); acks=0 gets no
  response at all. acks=-1 parks as a DelayedProduce until the high watermark covers the
  append (every ISR member has it); NOT_ENOUGH_REPLICAS when the ISR is below
  min.insync.replicas before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND when it falls below
  while waiting, REQUEST_TIMED_OUT at timeout_ms.
- Each partition fails alone: UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE (CRC, torn batch),
  UNSUPPORTED_FOR_MESSAGE_FORMAT (magic < 2), MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.replica_manager import ProduceResult
from protocol.errors import ErrorCode


def _response(request, results: dict) -> dict:
    return {
        "responses": [
            {
                "name": topic.name,
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": (r := results[(topic.name, p.index)]).error,
                        "base_offset": r.base_offset,
                        "log_append_time_ms": r.log_append_time_ms,
                        "log_start_offset": r.log_start_offset,
                        "error_message": r.error_message,
                    }
                    for p in topic.partition_data
                ],
            }
            for topic in request.topic_data
        ],
        "throttle_time_ms": 0,
    }


@register(0, "Produce", 3, 11)
async def handle(ctx: RequestContext, request) -> dict | None:
    entries = {(t.name, p.index): p.records for t in request.topic_data for p in t.partition_data}
    if request.acks not in (-1, 0, 1):
        results = {key: ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS) for key in entries}
    else:
        results = await ctx.broker.replica_manager.produce(request.acks, request.timeout_ms, entries)
    if request.acks == 0:
        return None
    return _response(request, results)
