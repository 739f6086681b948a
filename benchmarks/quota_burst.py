"""A burst of reservations through the real control plane and two draguard replicas (issue 30).

Run: ``KUBEBUILDER_ASSETS=... python benchmarks/quota_burst.py [--quick] [--rounds N]`` (about 6
minutes; ``--quick`` about 1). Needs the Kubernetes binaries (``/work/shared/k8s/README.md``) and
helm-sdkpy, as the end-to-end tests do.

The burst is ``tests/kube/burst.py``'s: N workers at once, each creates a ResourceClaim and a Pod as
a tenant and reserves the claim as kube-scheduler does at PreBind, through draguard installed from
the chart with two replicas (the quota webhook at its default ``failurePolicy: Fail``) behind the
Service's stand-in. Two shapes: 200 workers in one namespace (quota: 150 claim objects, 40 cores
of reservations) and 1,000 over ten namespaces (75 and 20 each). Each is run three ways, in
alternating rounds so that load from elsewhere falls on all alike:

* ``quota``: the chart as it is;
* ``quota off``: the same with the quota webhook disabled, the baseline: the API server and
  draguard's other webhooks (selectors on the claim, prescheduled and sharing on the pod, sharing
  on the reservation), which the quota rule adds to;
* ``no draguard``: the API server alone.

Reported per run: the calls the quota rule decides (pod creations and reservations) that were
decided, the refusals that were no rule's decision (draguard busy, a ledger it could not write in
time, no answer: "undecided", which a controller would back off from), the overcommit (reservations
admitted past a namespace's 40 or 20 cores), the burst's wall time, p50 and p99 latency of the
decided calls as the client saw them, and what the quota ledger cost the API server (its reads,
its updates and those refused as conflicts, and how long draguard's calls waited in API Priority
and Fairness' queues). Target: with the quota rule, 0 undecided and
exactly the limit admitted, and the wall time of 200 workers in one namespace within 2x the
baseline's (the median of the rounds' ratios).
Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # benchmarks/webhook.py would shadow the webhook package
sys.path.insert(1, str(ROOT / "tests" / "kube"))

from burst import Access, Burst, Outcome, median, percentile, prepared, run  # noqa: E402
from controlplane import ControlPlane, missing_binaries  # noqa: E402

MODES: dict[str, dict[str, Any] | None] = {
    "quota": {},
    "quota off": {"webhooks": {"quota": {"enabled": False}}},
    "no draguard": None,
}
TARGET_RATIO = 2.0


@dataclass(frozen=True)
class Shape:
    name: str
    namespaces: int
    workers: int
    claims: int
    cpu: int

    def burst(self, tag: str) -> Burst:
        names = tuple(f"burst-{tag}-{n}" for n in range(self.namespaces))
        return Burst(names, self.workers, self.claims, self.cpu)


SHAPES = (Shape("1 namespace", 1, 200, 150, 40), Shape("10 namespaces", 10, 1000, 75, 20))
QUICK = (Shape("1 namespace", 1, 40, 30, 8), Shape("2 namespaces", 2, 80, 30, 8))


@dataclass(frozen=True)
class Result:
    shape: str
    mode: str
    decided: int
    undecided: int
    admitted: int
    overcommit: int
    seconds: float
    p50: float
    p99: float
    ledger: Ledger
    why: tuple[str, ...] = ()  # the undecided refusals' messages, a few
    others: tuple[str, ...] = ()  # refusals of other kinds, counted by step, status and reason

    def line(self) -> str:
        return (
            f"  {self.mode:<12} decided {self.decided:5d}  undecided {self.undecided:4d}  admitted "
            f"{self.admitted:4d}  overcommit {self.overcommit}  wall {self.seconds:6.2f} s  p50 "
            f"{self.p50 * 1000:6.0f} ms  p99 {self.p99 * 1000:6.0f} ms  ledger reads {self.ledger.reads}, "
            f"writes {self.ledger.stored} ({self.ledger.conflicts} conflicts), queued by the API server "
            f"{self.ledger.queued:.2f} s"
            + "".join(f"\n    undecided: {why}" for why in self.why)
            + "".join(f"\n    refused: {other}" for other in self.others)
        )


class Ledger(NamedTuple):
    """The API server's own counts (``/metrics``) of what the quota ledger cost it: ConfigMap reads,
    creations and updates stored, those refused as conflicts (during a burst, the ledger's), and
    the seconds requests of ServiceAccounts (draguard's) waited in API Priority and Fairness'
    queues: whether a FlowSchema of draguard's own would speed its ledger calls."""

    reads: int
    stored: int
    conflicts: int
    queued: float

    def since(self, before: Ledger) -> Ledger:
        return Ledger(
            self.reads - before.reads,
            self.stored - before.stored,
            self.conflicts - before.conflicts,
            self.queued - before.queued,
        )


def ledger_counts(plane: ControlPlane) -> Ledger:
    api = plane.client()
    params = api.param_serialize(
        method="GET", resource_path="/metrics", header_params={"Accept": "text/plain"}
    )
    text = api.call_api(*params).response.read().decode()
    reads = stored = conflicts = 0
    queued = 0.0
    for line in text.splitlines():
        value = float(line.rsplit(" ", 1)[-1]) if line[:1].isalpha() else 0.0
        if line.startswith("apiserver_request_total{") and 'resource="configmaps"' in line:
            reads += int(value) if 'verb="GET"' in line else 0
            if 'verb="PUT"' in line or 'verb="POST"' in line:
                stored += int(value) if 'code="200"' in line or 'code="201"' in line else 0
                conflicts += int(value) if 'code="409"' in line else 0
        elif line.startswith("apiserver_flowcontrol_request_wait_duration_seconds_sum{"):
            queued += value if 'flow_schema="service-accounts"' in line else 0.0
    return Ledger(reads, stored, conflicts, queued)


def measure(plane: ControlPlane, shape: Shape, mode: str, tag: str) -> Result:
    burst = shape.burst(tag)
    with prepared(plane, burst, MODES[mode]):
        before = ledger_counts(plane)
        outcome = run(burst, Access.of(plane))
        ledger = ledger_counts(plane).since(before)
    return summarise(shape, mode, burst, outcome, ledger)


def summarise(shape: Shape, mode: str, burst: Burst, outcome: Outcome, ledger: Ledger) -> Result:
    decided = [c for c in outcome.calls if c.step in ("pod", "reserve") and not c.undecided]
    admitted = {ns: len(outcome.reserved(ns)) for ns in burst.namespaces}
    latencies = outcome.latencies()
    return Result(
        shape.name,
        mode,
        len(decided),
        len(outcome.undecided()),
        sum(admitted.values()),
        sum(max(0, n - burst.cpu) for n in admitted.values()) if mode == "quota" else 0,
        outcome.seconds,
        median(latencies),
        percentile(latencies, 0.99),
        ledger,
        tuple(sorted({f"{c.step}: HTTP {c.status}: {c.message[:300]}" for c in outcome.undecided()}))[:5],
        refusals(outcome),
    )


def refusals(outcome: Outcome) -> tuple[str, ...]:
    """The refusals that are rules' decisions or the API server's own, counted by kind."""
    kinds = Counter(
        (c.step, c.status, re.sub(r"\d+", "N", c.message)[:110])
        for c in outcome.calls
        if c.status >= 300 and not c.undecided
    )
    return tuple(f"{n} x {step}: HTTP {status}: {why}" for (step, status, why), n in sorted(kinds.items()))


def report(shape: Shape, results: Sequence[Result]) -> list[str]:
    """The shape's figures and ratios; the targets it missed."""
    missed = []
    on = [r for r in results if r.mode == "quota"]
    for result in on:
        if result.undecided or result.overcommit or result.admitted != shape.cpu * shape.namespaces:
            missed.append(f"{shape.name}: {result.undecided} undecided, {result.admitted} admitted")
    for base in ("quota off", "no draguard"):
        walls = [r.seconds for r in results if r.mode == base]
        ratios = [q.seconds / b for q, b in zip(on, walls, strict=True)]
        print(f"  wall time with the quota rule / {base}: per round "
              f"{', '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f}")  # fmt: skip
        if base == "quota off" and shape.namespaces == 1 and statistics.median(ratios) > TARGET_RATIO:
            missed.append(f"{shape.name}: {statistics.median(ratios):.2f}x the baseline's wall time")
    return missed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="40 and 80 workers, one round")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of the three modes (default 3)")
    parser.add_argument("--namespaces", type=int, default=None, help="only the shape with this many")
    args = parser.parse_args(argv)
    missing = missing_binaries()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    rounds = args.rounds or (1 if args.quick else 3)
    plane = ControlPlane(
        Path(os.environ["KUBEBUILDER_ASSETS"]), feature_gates={"DRANodeAllocatableResources": True}
    )
    plane.start()
    missed: list[str] = []
    try:
        shapes = QUICK if args.quick else SHAPES
        for n, shape in enumerate(s for s in shapes if args.namespaces in (None, s.namespaces)):
            quota = f"quota {shape.claims} claims and {shape.cpu} cpu each"
            print(f"{shape.name}, {shape.workers} workers, {quota}:")
            results = []
            for r in range(rounds):
                for m, mode in enumerate(MODES):
                    results.append(measure(plane, shape, mode, f"{n}{r}{m}"))
                    print(results[-1].line(), flush=True)
            missed += report(shape, results)
    finally:
        plane.stop()
    for miss in missed:
        print(f"target missed: {miss}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
