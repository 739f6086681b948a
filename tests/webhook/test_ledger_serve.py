"""``draguard serve --state`` keeps the quota ledger in its process, so the quota holds on files too.

Two replicas sharing the ledger through the API server are tested on the real one, with the
chart's RBAC: ``tests/kube/test_e2e_quota.py`` (200 concurrent tenants, 0 overcommit); the ledger's
behaviour when the API server drops or loses a write is in ``test_ledger.py``.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
NS = "team-a"
CLAIMS = 200
ROOM = 100
UNDECIDED = "draguard could not check rule quota"


def claim(i: int, allocated: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"c-{i}", "namespace": NS, "uid": f"uid-c-{i}", "resourceVersion": "1"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "exactly": {
                            "deviceClassName": "cpu",
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "capacity": {"requests": {"cpu.example.com/cpu": "1"}},
                        },
                    }
                ]
            }
        },
    }
    if allocated:
        body["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "r",
                            "driver": "cpu.example.com",
                            "pool": "node-1",
                            "device": "socket0",
                            "shareID": f"share-{i}",
                            "consumedCapacity": {"cpu.example.com/cpu": "1"},
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": f"p-{i}", "uid": f"uid-p-{i}"}],
        }
    return body


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i}", "namespace": NS, "uid": f"uid-p-{i}"},
        "spec": {
            "containers": [{"name": "main", "image": "app", "resources": {"claims": [{"name": "c"}]}}],
            "resourceClaims": [{"name": "c", "resourceClaimName": f"c-{i}"}],
        },
    }


CLUSTER: list[tuple[str, dict[str, Any]]] = [
    ("Namespace", {"metadata": {"name": NS}}),
    ("Node", {"metadata": {"name": "node-1"}}),
    (
        "DeviceClass",
        {
            "metadata": {"name": "cpu"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "cpu.example.com"'}}]},
        },
    ),
    (
        "ResourceSlice",
        {
            "metadata": {"name": "node-1-cpu"},
            "spec": {
                "driver": "cpu.example.com",
                "nodeName": "node-1",
                "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "socket0",
                        "allowMultipleAllocations": True,
                        "capacity": {"cpu.example.com/cpu": {"value": "256"}},
                        "nodeAllocatableResources": {
                            "cpu": {
                                "mapping": {"capacityKey": "cpu.example.com/cpu", "capacityMultiplier": "1"}
                            }
                        },
                    }
                ],
            },
        },
    ),
    (
        "ResourceQuota",
        {
            "metadata": {"name": "team-a-quota", "namespace": NS},
            "spec": {"hard": {"requests.cpu": str(ROOM)}},
            "status": {"hard": {"requests.cpu": str(ROOM)}, "used": {"requests.cpu": "0"}},
        },
    ),
]


def review(i: int) -> bytes:
    request = {
        "uid": f"review-{i}",
        "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
        "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
        "subResource": "status",
        "namespace": NS,
        "name": f"c-{i}",
        "operation": "UPDATE",
        "userInfo": {"username": "system:kube-scheduler"},
        "object": claim(i, allocated=True),
        "oldObject": claim(i, allocated=False),
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


class Replica:
    """One ``draguard serve`` process (``source``: ``--kubeconfig F`` or ``--state DIR``) and an HTTPS
    client for it."""

    def __init__(self, *source: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "webhook.cli",
                "serve",
                *source,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--metrics-port",
                "0",
                "--health-port",
                "0",
                "--exit-after",
                "60",
                "--log-level",
                "error",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.process.stdout is not None
        url = ca = ""
        while not (url and ca):
            line = self.process.stdout.readline()
            assert line, f"serve exited: {self.process.stderr.read() if self.process.stderr else ''}"
            if found := re.search(r"draguard serving (https://\S+) ", line):
                url = found[1]
            if found := re.search(r"clients verify the server with (\S+)", line):
                ca = found[1]
        self.url, self.tls = url, ssl.create_default_context(cafile=ca)
        self._local = threading.local()

    def ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", context=self.tls, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except URLError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"{self.url} not ready")

    def _connection(self) -> http.client.HTTPSConnection:
        """One kept-alive connection per client thread, as the API server keeps its own."""
        connection: http.client.HTTPSConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            host, port = urlsplit(self.url).hostname, urlsplit(self.url).port
            connection = http.client.HTTPSConnection(host or "", port, context=self.tls, timeout=10)
            self._local.connection = connection
        return connection

    def admit(self, i: int) -> bool:
        """Whether the reservation of claim i was admitted, retrying undecided answers."""
        for _ in range(30):
            connection = self._connection()
            connection.request(
                "POST", "/validate", body=review(i), headers={"Content-Type": "application/json"}
            )
            response = json.load(connection.getresponse())["response"]
            if response["allowed"]:
                return True
            if UNDECIDED not in response["status"]["message"]:
                return False
            time.sleep(0.02)
        raise AssertionError(f"claim c-{i}: never decided")

    def stop(self) -> None:
        self.process.terminate()
        self.process.communicate(timeout=10)


def test_on_files_one_replica_keeps_the_ledger_in_memory(tmp_path: Path) -> None:
    """serve --state has no API server to share a ledger through: the charges it admits are kept in
    the process, on top of the claims the files show allocated, so the quota still holds."""
    kinds = {"Namespace": "v1", "Node": "v1", "ResourceQuota": "v1"}
    items = [{"apiVersion": kinds.get(k, "resource.k8s.io/v1"), "kind": k, **o} for k, o in CLUSTER]
    # Ten claims allocated in the files already (ten of the hundred CPUs), the rest to be reserved.
    items += [pod(i) for i in range(CLAIMS)] + [claim(i, allocated=i < 10) for i in range(CLAIMS)]
    (tmp_path / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    # The slices carry KEP-5517's 1.37 field (nodeAllocatableResources), which a 1.36 API server's
    # strict decoding does not know: the state says it comes from a newer cluster.
    replica = Replica("--state", str(tmp_path / "cluster.json"), "--unknown-fields", "warn")
    try:
        replica.ready()
        with ThreadPoolExecutor(16) as pool:
            admitted = [ok for ok in pool.map(replica.admit, range(10, CLAIMS))]
    finally:
        replica.stop()
    assert admitted.count(True) == ROOM - 10
