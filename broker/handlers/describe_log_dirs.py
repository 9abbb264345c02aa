"""DescribeLogDirs (key 35), v0-4: this broker's log dirs, each with its error, the partitions it
holds (size, offset lag, whether it is a future log) and, v4+, the volume's total and usable bytes.

- Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED, v3+ at the top, no results).
- Topics null: every partition; else only those listed. An offline dir answers KAFKA_STORAGE_ERROR
  with no topics. Offset lag: high watermark minus log end offset (at least 0) for a current log,
  the current log's end minus the future log's for a future one (Kafka's getLogEndOffsetLag).
"""

from __future__ import annotations

import os
import shutil

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode


@register(35)
async def handle(ctx: RequestContext, request) -> dict:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results": []}
    wanted = None if request.topics is None else {
        (t.topic, p) for t in request.topics for p in t.partitions}
    rm = ctx.services.replica_manager
    manager = rm.log_manager
    results = []
    for name, log_dir in manager.dirs.items():
        path = os.path.abspath(name)
        if log_dir.offline:
            results.append({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": path,
                            "topics": [], "total_bytes": -1, "usable_bytes": -1})
            continue
        topics: dict[str, list[dict]] = {}
        for is_future, logs in ((False, manager.logs_in(name)), (True, manager.future_logs_in(name))):
            for key, log in sorted(logs.items()):
                if wanted is not None and key not in wanted:
                    continue
                if is_future:
                    current = manager.get_log(*key)
                    lag = current.log_end_offset - log.log_end_offset if current is not None else 0
                else:
                    lag = max(log.high_watermark - log.log_end_offset, 0)
                topics.setdefault(key[0], []).append({
                    "partition_index": key[1], "partition_size": log.size_in_bytes,
                    "offset_lag": lag, "is_future_key": is_future})
        try:
            usage = shutil.disk_usage(log_dir.path)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append({"error_code": ErrorCode.NONE, "log_dir": path, "total_bytes": total,
                        "usable_bytes": usable, "topics": [
                            {"name": topic, "partitions": partitions}
                            for topic, partitions in topics.items()]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}
