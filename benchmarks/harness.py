"""What the server benchmarks share: the GPU nodes they load and the wait for a server's banner.

Imported as ``benchmarks.harness`` (each script puts the repository root first on ``sys.path``, so
that ``benchmarks/webhook.py`` does not shadow the ``webhook`` package).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def gpu_node(name: str, index: int, devices: int, driver: str) -> list[dict[str, Any]]:
    """A Node (hostname and one of three zones) and its one ResourceSlice of ``devices`` GPUs:
    a100 and h100 alternating, each with its index, a driver version, its own uuid and 80Gi."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": f"z{index % 3}"}},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "allocatable": {"cpu": "63", "memory": "500Gi", "pods": "110"},
        },
    }
    gpus = [
        {
            "name": f"gpu-{d}",
            "attributes": {
                "model": {"string": "a100" if d % 2 else "h100"},
                "index": {"int": d},
                "driverVersion": {"version": "1.2.0"},
                "uuid": {"string": f"GPU-{name}-{d}"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for d in range(devices)
    ]
    pool = {"name": name, "generation": 1, "resourceSliceCount": 1}
    resource_slice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-{driver}"},
        "spec": {"driver": driver, "nodeName": name, "pool": pool, "devices": gpus},
    }
    return [node, resource_slice]


def two_claim_pod(name: str, namespace: str, claims: tuple[str, str]) -> dict[str, Any]:
    """The benchmarked pod: one container asking for 4 CPUs and the devices of two claims."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "resourceClaims": [
                {"name": "a", "resourceClaimName": claims[0]},
                {"name": "b", "resourceClaimName": claims[1]},
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/train:1",
                    "resources": {"requests": {"cpu": "4"}, "claims": [{"name": "a"}, {"name": "b"}]},
                }
            ],
        },
    }


def wait_for_line(process: subprocess.Popen[str], needle: str, timeout: float) -> str:
    """The first line of the process's output that holds ``needle``; an error if it exits or is late."""
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if needle in line:
            return line
        if not line and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
    raise RuntimeError(f"no {needle!r} from the server within {timeout:.0f}s")


def start_serve(state: str, cert: str, key: str, *flags: str) -> tuple[subprocess.Popen[str], int, float]:
    """``draguard serve --state STATE`` on 127.0.0.1 with the given pair and ``flags``: the process,
    its HTTPS port and how long it took to load the state and listen."""
    command = [
        sys.executable, "-m", "webhook.cli", "serve", "--state", state, "--host", "127.0.0.1", "--port", "0",
        "--metrics-port", "0", "--health-port", "0", "--tls-cert-file", cert, "--tls-key-file", key, *flags,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = wait_for_line(process, "draguard serving", 300)
    found = re.search(r":(\d+) ", line)
    assert found is not None, line
    return process, int(found.group(1)), time.perf_counter() - started
