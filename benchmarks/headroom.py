"""``draguard devices`` and ``draguard headroom`` on a GPU fleet at Kubernetes' scale (issue 26).

Run: ``python benchmarks/headroom.py [--quick] [--nodes N]`` (5,000 nodes, about 2 minutes;
``--quick``: 500 nodes, a few seconds).

The cluster, built in this process (loading is not measured; ``benchmarks/scale.py`` measures it):
N nodes of 63 allocatable CPUs with one ResourceSlice of 8 GPUs each
(``benchmarks/harness.py``), a DeviceClass, and a pending pod asking for 1 CPU and one GPU through
a template. So 40,000 devices, and 40,000 copies of the pod fit.

Measured, wall and CPU time, with the load average beside them (other work on the machine slows
both alike, so the ratios are the figures to compare between runs):

* **devices**: what ``draguard devices`` does once the objects are loaded: every pool and class
  counted (``Tally``), the document built and the tables printed; against the **devices
  baseline**, a plain loop over the same slices and claims counting each pool's devices,
  allocated and free (no classes, no taints, no counters): the least such a listing costs;
* **headroom**: ``draguard headroom`` once loaded, the collector paused as the command pauses it:
  the snapshot prepared, every copy placed until one does not fit, the answer built; against the
  **headroom baseline**, one whole dry run of the pod on the same prepared snapshot, which the
  plain path (placing copies one by one, ``allocate --sequence``) would pay per copy: the ratio
  headroom / (copies x baseline) is what the kept verdicts and scores save.

Targets (issue 26), scaled by nodes / 5,000: devices under 1 s, headroom under 30 s. The answer
must count every GPU (copies = 8 x nodes) and the classes' free devices must be 0 after them
(exit 3 if not). Exit codes: 0 targets met, 1 a target missed, 3 a wrong answer.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # benchmarks/cel.py would shadow the CEL engine

from benchmarks.harness import gpu_node  # noqa: E402
from policies.api.defaults import apply_defaults  # noqa: E402
from policies.api.kinds import decode  # noqa: E402
from policies.availability import Tally  # noqa: E402
from policies.availability.answer import document as devices_document  # noqa: E402
from policies.dryrun import DryRun, FeatureGates, Prepared, Question, with_uid  # noqa: E402
from policies.dryrun.headroom import headroom  # noqa: E402
from policies.dryrun.headroom_answer import document as headroom_document  # noqa: E402
from policies.snapshot import Snapshot  # noqa: E402
from webhook.commands.devices import print_tables  # noqa: E402

DRIVER = "gpu.example.com"
GPUS = 8
FULL_NODES = 5000
DEVICES_TARGET_S = 1.0
HEADROOM_TARGET_S = 30.0


def cluster(nodes: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for i in range(nodes):
        objects += gpu_node(f"node-{i:05d}", i, GPUS, DRIVER)
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    objects.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [selector]},
        }
    )
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    objects.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "bench"},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        }
    )
    container = {
        "name": "main",
        "image": "registry.example.com/train:1",
        "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
    }
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train", "namespace": "bench"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [container],
            },
        }
    )
    return objects


def timed(work: Callable[[], Any]) -> tuple[Any, float, float]:
    """What ``work`` returns, and its wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = work()
    return found, time.perf_counter() - wall, time.process_time() - cpu


def devices_baseline(snapshot: Snapshot) -> Counter[tuple[str, str]]:
    """Per pool, devices not allocated: a plain loop over the slices and the allocated claims."""
    taken = {
        (r.driver, r.pool, r.device)
        for claim in snapshot.allocated_claims()
        if claim.status is not None and claim.status.allocation is not None
        for r in claim.status.allocation.devices.results or ()
        if claim.status.allocation.devices is not None
    }
    free: Counter[tuple[str, str]] = Counter()
    for s in snapshot.slices:
        for device in s.spec.devices or ():
            if (s.spec.driver, s.spec.pool.name, device.name) not in taken:
                free[(s.spec.driver, s.spec.pool.name)] += 1
    return free


def devices(snapshot: Snapshot) -> str:
    out = io.StringIO()
    print_tables(devices_document(Tally().of(snapshot)), out, wide=True)
    return out.getvalue()


def load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="500 nodes")
    parser.add_argument("--nodes", type=int, default=None, help="default 5000 (500 with --quick)")
    args = parser.parse_args(argv)
    nodes = args.nodes or (500 if args.quick else FULL_NODES)
    scale = nodes / FULL_NODES
    now = datetime.now(UTC)
    snapshot = Snapshot.build(apply_defaults(decode(o), now) for o in cluster(nodes))
    (pod,) = snapshot.pending.values()
    pod = with_uid(pod)
    gc.freeze()  # the loaded cluster, never walked by the collector again (as serve freezes it)
    print(f"{nodes} nodes x {GPUS} GPUs, a pod asking for 1 CPU and one GPU; load average {load_average()}")

    free, base_wall, base_cpu = timed(lambda: devices_baseline(snapshot))
    table, dev_wall, dev_cpu = timed(lambda: devices(snapshot))
    print(f"  devices baseline (plain loop):   {base_wall:7.3f} s wall {base_cpu:7.3f} s CPU")
    print(
        f"  devices (counted, printed):      {dev_wall:7.3f} s wall {dev_cpu:7.3f} s CPU"
        f"   ratio {dev_cpu / base_cpu:.1f}   target < {DEVICES_TARGET_S * scale:.2f} s"
    )

    prepared = Prepared.of(snapshot, FeatureGates())
    _, one_wall, one_cpu = timed(lambda: DryRun(prepared).outcome(Question(pod)))
    print(f"  headroom baseline (one dry run): {one_wall:7.3f} s wall {one_cpu:7.3f} s CPU")

    def run() -> Any:
        gc.disable()  # as the command does: the placements make no cyclic garbage
        try:
            return headroom_document(headroom(Prepared.of(snapshot, FeatureGates()), pod), None, [])
        finally:
            gc.enable()

    answer, head_wall, head_cpu = timed(run)
    copies = answer.copies
    print(
        f"  headroom ({copies} copies):      {head_wall:7.3f} s wall {head_cpu:7.3f} s CPU"
        f"   ratio to copies x baseline {head_cpu / (copies * one_cpu):.4f}"
        f"   target < {HEADROOM_TARGET_S * scale:.1f} s"
    )
    print(f"  {answer.limit.message}")
    print(f"  {'; '.join(answer.limit.detail)}; load average {load_average()} after")

    wrong = []
    if sum(free.values()) != nodes * GPUS:
        wrong.append(f"the baseline counted {sum(free.values())} free devices")
    if f"{nodes * GPUS} free" not in table:
        wrong.append("devices did not count every GPU free")
    emptied = f"devices of class gpu: 0 free of {nodes * GPUS}"
    if copies != nodes * GPUS or answer.limit.detail[:1] != [emptied]:
        wrong.append(f"headroom placed {copies} copies ({answer.limit.detail})")
    if wrong:
        print("WRONG: " + "; ".join(wrong))
        return 3
    met = dev_wall < DEVICES_TARGET_S * scale and head_wall < HEADROOM_TARGET_S * scale
    print("targets: " + ("met" if met else "missed"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
