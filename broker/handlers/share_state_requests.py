"""What the share coordinator's requests (Initialize/Read/Write/DeleteShareGroupState) have in
common: an answer per partition named, grouped by topic as the request (their handlers use it;
it registers no handler)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable


async def per_partition(request, answer: Callable[[tuple, dict], Awaitable[dict]]) -> dict:
    """The share coordinator's requests' answer: `answer(key, partition)` for each partition
    named, key = (group, topic id, partition), grouped by topic as the request."""
    results = []
    for t in request["topics"]:
        topic_id = uuid.UUID(bytes=bytes(t["topic_id"]))
        partitions = [{"partition": p["partition"], "error_message": None,
                       **await answer((request["group_id"], topic_id, p["partition"]), p)}
                      for p in t["partitions"]]
        results.append({"topic_id": bytes(t["topic_id"]), "partitions": partitions})
    return {"results": results}
