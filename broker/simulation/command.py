"""`kafka-sim simulate`: run seeds, print each one's digest, faults and anomalies (with the events
that led to them), shrink a failing schedule, and write the HTML report."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from broker.server.log_setup import configure_logging
from broker.simulation.checker import Anomaly
from broker.simulation.fault_plan import (
    FAULTS_PER_MINUTE,
    KINDS,
    PlannedFault,
    parse_kinds,
    plan_faults,
)
from broker.simulation.report import write_report
from broker.simulation.simulator import SimulationResult, simulate

# String hashing is salted per process unless this is fixed; set iteration order would then
# differ from run to run, and with it the order of some broker work.
HASH_SEED = "0"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-sim simulate",
        description="Run the embedded cluster, a built-in workload and a fault schedule drawn "
                    "from a seed on simulated time, then check Kafka's guarantees over what "
                    "happened. The same seed gives the same history (its digest is printed).")
    parser.add_argument("--seed", type=int, default=1, help="the seed (default 1)")
    parser.add_argument("--seeds", type=int, default=1, metavar="N",
                        help="run N seeds from --seed on (default 1)")
    parser.add_argument("--duration", type=float, default=60.0, metavar="SECONDS",
                        help="simulated seconds of workload and faults (default 60)")
    parser.add_argument("--faults", default="default", metavar="KINDS",
                        help=f"fault kinds to draw, comma-separated, or all, default or none "
                             f"(all: {','.join(KINDS)}; default: all but power-loss)")
    parser.add_argument("--rate", type=float, default=FAULTS_PER_MINUTE, metavar="PER_MINUTE",
                        help=f"faults drawn per simulated minute (default {FAULTS_PER_MINUTE:g})")
    parser.add_argument("--keep", default=None, metavar="I,J",
                        help="apply only these faults of the seed's schedule (numbers as "
                             "printed; --shrink prints the list to replay)")
    parser.add_argument("--shrink", action="store_true",
                        help="when a seed fails, run it again with fewer faults until none can "
                             "be left out, and print the smallest schedule that still fails")
    parser.add_argument("--defect", default="", choices=("", "high-watermark-ignores-isr"),
                        help="build a deliberate bug in, to see the checker catch it")
    parser.add_argument("--report", type=Path, metavar="FILE.html",
                        help="write an HTML report (timelines, leaders, progress, anomalies) "
                             "of the last seed run")
    parser.add_argument("--data-dir", type=Path,
                        help="keep the brokers' data here (default: a temporary folder, removed)")
    return parser


def main(argv: list[str]) -> int:
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, "-m", "broker.server.cli", "simulate", *argv])
    args = _parser().parse_args(argv)
    try:
        kinds = parse_kinds(args.faults)
        keep = _indexes(args.keep)
    except ValueError as exc:
        print(f"kafka-sim simulate: {exc}", file=sys.stderr)
        return 2
    if args.duration <= 0 or args.seeds < 1 or args.rate < 0:
        print("kafka-sim simulate: --duration, --seeds and --rate must be positive",
              file=sys.stderr)
        return 2
    if args.report is not None and not args.report.parent.is_dir():
        print(f"kafka-sim simulate: --report: no folder {args.report.parent} to write it in",
              file=sys.stderr)
        return 2
    try:
        return _simulate_seeds(args, kinds, keep)
    except CommandError as exc:
        print(f"kafka-sim simulate: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


class CommandError(Exception):
    """What the user asked for cannot be done (a folder that cannot be written): one line."""


def _simulate_seeds(args: argparse.Namespace, kinds: tuple[str, ...], keep: set[int] | None
                    ) -> int:
    configure_logging("critical")  # the brokers' own lines would drown the report
    duration_ms = int(args.duration * 1000)
    failed = 0
    result = None
    for seed in range(args.seed, args.seed + args.seeds):
        plan = plan_faults(seed, [0, 1, 2], duration_ms, kinds, args.rate)
        # the faults' numbers in the seed's own schedule, as --keep names them
        numbers = [n for n in range(1, len(plan) + 1) if keep is None or n in keep]
        plan = [plan[n - 1] for n in numbers]
        result = _run(seed, plan, duration_ms, args)
        _print_result(result, numbers, args)
        if result.anomalies:
            failed += 1
            if args.shrink:
                _shrink(result, numbers, args)
    if args.seeds > 1:
        print(f"{args.seeds} seeds, {failed} with anomalies")
    if args.report is not None and result is not None:
        try:
            write_report(result, args.report)
        except OSError as exc:
            raise CommandError(f"--report: {exc}") from None
        print(f"report: {args.report}")
    return 1 if failed else 0


def _indexes(text: str | None) -> set[int] | None:
    if text is None:
        return None
    try:
        return {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise ValueError(f"--keep takes fault numbers such as 1,3 (got {text!r})") from None


def _run(seed: int, plan: list[PlannedFault], duration_ms: int,
         args: argparse.Namespace) -> SimulationResult:
    if args.data_dir is not None:
        folder = args.data_dir / f"seed-{seed}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"--data-dir: {exc}") from None
        return simulate(seed, folder, duration_ms=duration_ms, faults=plan, defect=args.defect)
    with tempfile.TemporaryDirectory(prefix=f"kafka-sim-seed-{seed}-") as folder:
        return simulate(seed, Path(folder), duration_ms=duration_ms, faults=plan,
                        defect=args.defect)


def _print_result(result: SimulationResult, numbers: list[int],
                  args: argparse.Namespace) -> None:
    c = result.counts
    speed = result.simulated_ms / 1000 / max(result.real_s, 1e-9)
    print(f"seed {result.seed}: {result.simulated_ms / 1000:.1f} simulated s in "
          f"{result.real_s:.1f} s ({speed:.0f}x), digest {result.digest}")
    print(f"  workload: {c['ack']} writes acknowledged ({c['unknown']} unknown), "
          f"{c['txn-commit']} transactions committed, {c['txn-abort']} aborted "
          f"({c['txn-unknown']} unknown), {c['read']} records read, {c['commit']} offset "
          f"commits, {c['keyed-records']} keyed records acknowledged ({c['compacted-away']} "
          f"compacted away since); "
          f"{c['requests']} requests")
    skipped = {e.get("number"): e.get("why") for e in result.history.of_kind("fault-skipped")}
    print(f"  faults: {len(result.faults)} planned, {len(skipped)} skipped")
    for i, (number, fault) in enumerate(zip(numbers, result.faults, strict=True), 1):
        mark = f" (skipped: {skipped[i]})" if i in skipped else ""
        print(f"   {number:3}. {fault.describe()}{mark}")
    if not result.anomalies:
        print("  no anomaly" + ("" if result.healed else " (the cluster did not heal)"))
        return
    print(f"  {len(result.anomalies)} anomalies:")
    for anomaly in _first_of_each(result.anomalies):
        print(f"    {anomaly.kind} at {anomaly.at_ms / 1000:.3f}s: {anomaly.text}")
        for event in result.history.around(anomaly.at_ms, anomaly.partition):
            print(f"        {event.line()}")
    shown = sum(1 for _ in _first_of_each(result.anomalies))
    if shown < len(result.anomalies):
        print(f"    ... and {len(result.anomalies) - shown} more of these kinds")
    print(f"  replay: {_replay(result.seed, args, args.keep)}")


def _replay(seed: int, args: argparse.Namespace, keep: str | None) -> str:
    """The command line that runs seed `seed` again with the faults `keep` names."""
    line = f"kafka-sim simulate --seed {seed} --duration {args.duration:g}"
    line += f" --faults {args.faults}" if keep != "" else " --faults none"
    if args.rate != FAULTS_PER_MINUTE:
        line += f" --rate {args.rate:g}"
    if keep:
        line += f" --keep {keep}"
    return line + (f" --defect {args.defect}" if args.defect else "")


def _first_of_each(anomalies: list[Anomaly], per_kind: int = 3) -> list[Anomaly]:
    shown: dict[str, int] = {}
    out = []
    for anomaly in anomalies:
        if shown.get(anomaly.kind, 0) < per_kind:
            shown[anomaly.kind] = shown.get(anomaly.kind, 0) + 1
            out.append(anomaly)
    return out


def smallest_failing(plan: list[PlannedFault],
                     fails: Callable[[list[PlannedFault]], bool]) -> list[int]:
    """The numbers (from 1) of a smaller schedule that still fails: each fault left out in turn,
    for good whenever the run without it still fails (what remains is needed, one at a time)."""
    numbers = list(range(1, len(plan) + 1))
    i = 0
    while i < len(numbers):
        trial = numbers[:i] + numbers[i + 1:]
        if fails([plan[n - 1] for n in trial]):
            numbers = trial
        else:
            i += 1
    return numbers


def _shrink(failed: SimulationResult, names: list[int], args: argparse.Namespace) -> None:
    duration_ms = int(args.duration * 1000)

    def fails(trial: list[PlannedFault]) -> bool:
        result = _run(failed.seed, trial, duration_ms, args)
        print(f"  shrink: {len(trial)} faults: {len(result.anomalies)} anomalies")
        return bool(result.anomalies)

    numbers = [names[i - 1] for i in smallest_failing(failed.faults, fails)]
    kept = ",".join(map(str, numbers))
    print(f"  smallest failing schedule: faults {kept or 'none'} of seed {failed.seed}")
    for number in numbers:
        print(f"        {failed.faults[names.index(number)].describe()}")
    print(f"  replay: {_replay(failed.seed, args, kept)}")
