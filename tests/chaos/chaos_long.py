"""`make chaos`: the chaos scenario for CHAOS_SECONDS (default 600) against its own ZooKeeper,
printing the faults injected by kind, records sent and acknowledged, lost, duplicated and replica
divergence. Exits 1 when anything broke the promise. CHAOS_SEED replays a run; CHAOS_RATE sets
the records produced per second (300)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from broker.server.zookeeper_runner import ZooKeeperServer
from tests.chaos.scenario import chaos_seed, run_chaos
from tests.chaos.workload import RATE_PER_S

DEFAULT_SECONDS = 600


def main() -> int:
    seconds = float(os.environ.get("CHAOS_SECONDS") or DEFAULT_SECONDS)
    root = Path(tempfile.mkdtemp(prefix="kafka-sim-chaos-"))  # kept when the run fails
    with ZooKeeperServer(root / "zookeeper") as zookeeper:
        report = run_chaos(f"{zookeeper.connect_string}/chaos", root / "data", seconds,
                           chaos_seed(), log=lambda line: print(line, flush=True),
                           rate_per_s=int(os.environ.get("CHAOS_RATE") or RATE_PER_S))
    print(f"faults injected: {dict(sorted(report.faults.items()))} (total {sum(report.faults.values())})")
    print(f"records: sent {report.sent}, acknowledged {report.acknowledged}, "
          f"lost {report.lost}, duplicated {report.duplicated} ({report.resent_after_epoch_bump} "
          f"re-sent by librdkafka under a bumped epoch)")
    print(f"replica divergence: {len(report.divergence)}; audit (exit, partitions, records, "
          f"violations): {report.audit}")
    problems = report.problems()
    for problem in problems:
        print("PROBLEM:", problem)
    if problems:
        print(f"the cluster's data and broker logs are kept in {root}")
        return 1
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
