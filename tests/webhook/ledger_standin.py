"""A stand-in for kube-apiserver with faults on ConfigMap writes, for the quota ledger tests.

The real API server (``tests/kube``) answers everything else the ledger does; what it cannot be made
to do on demand is fail one particular write. :class:`FaultyApiserver` extends the in-memory API
server of ``tests/charts/apiserver_standin.py`` (objects over HTTP, a PUT whose
``metadata.resourceVersion`` is not the stored one fails with 409 Conflict, a POST of an existing
name with 409 AlreadyExists, all under one lock) with the faults a real API server shows under
stress, one per ConfigMap write, in order:

* ``drop``: the write is refused with 503 and not applied (an overloaded API server);
* ``lose``: the write is applied but the answer is a 504 (the connection broke after the commit);
* ``delay``: the write waits ``delay_seconds`` before it is applied (a slow etcd), so a client with
  a shorter timeout gives up while the write still lands.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1] / "charts"))

from apiserver_standin import Apiserver

SERVICE_UNAVAILABLE = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "code": 503,
    "reason": "ServiceUnavailable",
    "message": "etcdserver: leader changed",
}
TIMEOUT = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "code": 504,
    "reason": "Timeout",
    "message": "the request did not complete in time",
}


class FaultyApiserver(Apiserver):
    def __init__(self) -> None:
        super().__init__()
        self.faults: list[str] = []
        self.delay_seconds = 0.0
        self.writes = 0
        self.answered = 0  # writes answered, delayed ones included
        self._faults_lock = threading.Lock()

    def _next_fault(self, method: str, path: str) -> str | None:
        if method not in ("POST", "PUT") or "/configmaps" not in path:
            return None
        with self._faults_lock:
            self.writes += 1
            return self.faults.pop(0) if self.faults else None

    def handle(self, method: str, raw_path: str, body: bytes) -> tuple[int, Any]:
        fault = self._next_fault(method, raw_path)
        if fault == "drop":
            return 503, SERVICE_UNAVAILABLE
        if fault == "delay":
            time.sleep(self.delay_seconds)
        code, payload = super().handle(method, raw_path, body)
        if method in ("POST", "PUT") and "/configmaps" in raw_path:
            with self._faults_lock:
                self.answered += 1
        if fault == "lose":
            return 504, TIMEOUT
        return code, payload


@contextmanager
def faulty() -> Iterator[FaultyApiserver]:
    server = FaultyApiserver()
    server.start()
    try:
        yield server
    finally:
        server.stop()
