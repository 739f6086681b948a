"""The command line as a person meets it: start-up, a small validate, a 5 MB ``kubectl get -o yaml`` List.

Every figure is a whole ``draguard`` process (import time included), the best of several runs,
next to the baseline measured in the same run: ``python -c pass``, the interpreter's own start-up.
The processes may write and read their bytecode cache (``__pycache__``), as an installed draguard
does from its second run on, even where ``PYTHONDONTWRITEBYTECODE`` is set (some CI images and
sandboxes set it): compiling some 90 modules from source is then a third of a small validate.
Targets (issue 15), on the 2-core machine:

* ``draguard --help`` under 0.3 s;
* ``draguard validate`` of the example cluster (10 objects) under 0.5 s;
* ``draguard validate`` of a 5 MB List as ``kubectl get -o yaml`` prints it under 10 s (and its
  peak memory; the same List as JSON is printed beside it, to show what YAML costs).

Run: python benchmarks/cli.py [--quick]   (exit 1 when a target is missed; --quick: one run each
and a 0.3 MB List, a smoke test whose figures mean little)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from benchmarks.harness import gpu_node  # noqa: E402

EXAMPLES = ROOT / "examples" / "gpu-cluster"
MB = 1_000_000


@dataclass
class Run:
    seconds: float
    cpu: float  # user + system: what the process itself used, less sensitive to a busy machine
    peak_mib: float


# Times one child and reads its peak memory from a small interpreter of its own: a child forked from
# this process would count the generated List this process holds in its peak.
_MEASURE = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
err = done.stderr.decode()[-500:]
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak": peak, "code": done.returncode, "err": err}))
"""


def run(argv: list[str]) -> Run:
    """One process: its wall time and peak resident memory (Linux reports KiB); output discarded."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    measured = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    result = json.loads(measured.stdout)
    if result["code"] not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} exited {result['code']}: {result['err']}")
    return Run(result["seconds"], result["cpu"], result["peak"])


def best(argv: list[str], repeat: int) -> Run:
    run(argv)  # warm: the bytecode cache written
    runs = [run(argv) for _ in range(repeat)]
    return min(runs, key=lambda r: r.seconds)


def draguard(*args: str) -> list[str]:
    return [sys.executable, "-m", "webhook.cli", *args]


def metadata(obj: dict[str, Any], n: int) -> None:
    """What the API server adds to every object it returns (and ``kubectl get -o yaml`` prints)."""
    obj["metadata"].update(
        {
            "uid": f"6f1c1f38-5d47-4c1e-9a0e-{n:012d}",
            "resourceVersion": str(100_000 + n),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [
                {
                    "apiVersion": obj["apiVersion"],
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/hostname": {}}}},
                    "manager": "kubelet",
                    "operation": "Update",
                    "time": "2026-01-01T00:00:00Z",
                }
            ],
        }
    )


def cluster_list(size: int) -> dict[str, Any]:
    """A ``kind: List`` of Nodes and their ResourceSlices (8 GPUs each) of about ``size`` bytes of YAML."""
    items: list[dict[str, Any]] = []
    per_node = len(yaml.safe_dump({"items": _node_items(0)}))
    for i in range(max(1, size // per_node)):
        items += _node_items(i)
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


def _node_items(i: int) -> list[dict[str, Any]]:
    objects = gpu_node(f"node-{i}", i, 8, "gpu.example.com")
    for n, obj in enumerate(objects):
        metadata(obj, 2 * i + n)
    return objects


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one run each, a 0.3 MB List")
    args = parser.parse_args()
    repeat = 1 if args.quick else 5
    size = int((0.3 if args.quick else 5) * MB)

    with tempfile.TemporaryDirectory(prefix="draguard-bench-cli-") as tmp:
        document = cluster_list(size)
        as_yaml, as_json = Path(tmp) / "list.yaml", Path(tmp) / "list.json"
        as_yaml.write_text(yaml.safe_dump(document, sort_keys=False))
        as_json.write_text(json.dumps(document, indent=4))
        objects = len(document["items"])
        del document

        baseline = best([sys.executable, "-c", "pass"], repeat * 2)
        small = draguard("validate", "-f", str(EXAMPLES))
        rows = [
            ("draguard --help", best(draguard("--help"), repeat * 2), 0.3),
            ("draguard validate, example cluster (10 objects)", best(small, repeat), 0.5),
            (
                f"draguard validate, {as_yaml.stat().st_size / MB:.1f} MB YAML List ({objects} objects)",
                best(draguard("validate", "-f", str(as_yaml)), min(repeat, 2)),
                10.0 if not args.quick else None,
            ),
            (
                f"  the same List as JSON ({as_json.stat().st_size / MB:.1f} MB)",
                best(draguard("validate", "-f", str(as_json)), min(repeat, 2)),
                None,
            ),
        ]  # fmt: skip

    print(f"baseline: python -c pass  {baseline.seconds * 1000:.0f} ms (CPU {baseline.cpu * 1000:.0f} ms)")
    print(f"{'what':<58} {'time':>9} {'x baseline':>11} {'CPU':>8} {'peak RSS':>9}  target")
    missed = False
    for name, result, target in rows:
        met = target is None or result.seconds < target
        missed |= not met
        goal = "" if target is None else f"< {target:g} s {'ok' if met else 'MISSED'}"
        print(
            f"{name:<58} {result.seconds:>8.2f}s {result.seconds / baseline.seconds:>10.1f}x "
            f"{result.cpu:>7.2f}s {result.peak_mib:>5.0f} MiB  {goal}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
