"""Selector evaluation at cluster scale: 40,000 devices, 5 selectors.

Prints
* cold: compiling the selectors, binding every device and evaluating every (selector, device)
  pair for the first time (what the first allocation after a webhook start pays);
* warm: the same 200,000 checks again through the SelectorCache (what every later allocation on
  an unchanged snapshot pays);
* the per-evaluation cost of the engine itself, without the result memo;
* memory growth over 1,000,000 evaluations (must stay flat).

Targets on the 2-core CI machine: cold under 2 s, warm under 50 ms.

Run: PYTHONPATH=. python benchmarks/cel.py [--engine rust|celpy] [--devices N]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Any

# This file is named like the Rust engine's package ("cel"); run as a script, its own directory
# would come first on sys.path and shadow the engine.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

from policies.api.resource import ResourceSlice  # noqa: E402
from policies.cel import Environment, SelectorCache, compile_expression  # noqa: E402

SELECTORS = [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "a100"',
    'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))',
    '"numa" in device.attributes["gpu.example.com"] && '
    'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("535.0.0"))',
    'cel.bind(g, device.attributes["gpu.example.com"], g.model.startsWith("h") && g.migCapable)',
]
MODELS = ["a100", "h100", "h200", "l4"]
VERSIONS = ["535.104.5", "550.54.14", "560.28.3"]
MEMORY = ["40Gi", "80Gi", "141Gi"]
PER_SLICE = 100


def make_slices(devices: int) -> list[ResourceSlice]:
    """Realistic slices: a few models and driver versions, but every device has its own UUID."""
    slices = []
    for s in range(devices // PER_SLICE):
        items = []
        for d in range(PER_SLICE):
            n = s * PER_SLICE + d
            items.append(
                {
                    "name": f"gpu-{d}",
                    "attributes": {
                        "model": {"string": MODELS[n % len(MODELS)]},
                        "driverVersion": {"version": VERSIONS[s % len(VERSIONS)]},
                        "numa": {"int": d % 2},
                        "migCapable": {"bool": n % 3 == 0},
                        "uuid": {"string": f"GPU-{n:08d}-aaaa-bbbb"},
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{d % 4:02x}"},
                    },
                    "capacity": {"memory": {"value": MEMORY[n % len(MEMORY)]}},
                }
            )
        slices.append(
            ResourceSlice.model_validate(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"node-{s}-gpu", "generation": 1},
                    "spec": {
                        "driver": "gpu.example.com",
                        "pool": {"name": f"node-{s}", "resourceSliceCount": 1},
                        "nodeName": f"node-{s}",
                        "devices": items,
                    },
                }
            )
        )
    return slices


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def check_all(cache: SelectorCache, programs: list[Any], slices: list[ResourceSlice]) -> int:
    matched = 0
    matches = cache.matches
    for slc in slices:
        for binding in cache.bind_slice(slc):
            for program in programs:
                matched += matches(program, binding)
    return matched


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="rust", choices=["rust", "celpy"])
    parser.add_argument("--devices", type=int, default=40_000)
    args = parser.parse_args()
    env = Environment(engine=args.engine)
    slices = make_slices(args.devices)
    total = args.devices * len(SELECTORS)
    print(f"{args.devices} devices x {len(SELECTORS)} selectors = {total} checks, engine {args.engine}")

    gc.collect()
    start = time.perf_counter()
    programs = [compile_expression(s, env) for s in SELECTORS]
    cache = SelectorCache(env)
    matched = check_all(cache, programs, slices)
    cold = time.perf_counter() - start
    print(f"cold:  {cold * 1000:8.1f} ms  ({cold / total * 1e6:.2f} us per check, {matched} matches)")

    runs = []
    for _ in range(5):
        start = time.perf_counter()
        assert check_all(cache, programs, slices) == matched
        runs.append(time.perf_counter() - start)
    warm = min(runs)
    print(f"warm:  {warm * 1000:8.1f} ms  ({warm / total * 1e6:.3f} us per check, best of 5)")

    bindings = [binding for s in slices[:10] for binding in cache.bind_slice(s)]
    for program in programs:
        start = time.perf_counter()
        for binding in bindings:
            program.evaluate(binding)
        per = (time.perf_counter() - start) / len(bindings)
        print(f"engine: {per * 1e6:7.1f} us per evaluation without memo  {program.expression[:60]}")

    gc.collect()
    before = rss_mib()
    done = 0
    marks = []
    while done < 1_000_000:
        for binding in bindings:
            for program in programs:
                program.matches(binding)
        done += len(bindings) * len(programs)
        if done % 200_000 < len(bindings) * len(programs):
            marks.append(rss_mib())
    for _ in range(20):  # the engine path, bypassing the memo
        for binding in bindings[:100]:
            for program in programs:
                program.evaluate(binding)
    gc.collect()
    after = rss_mib()
    print(
        f"memory: {before:.1f} MiB before, {after:.1f} MiB after {done} evaluations "
        f"(+{after - before:.1f} MiB; checkpoints {', '.join(f'{m:.1f}' for m in marks)})"
    )


if __name__ == "__main__":
    main()
