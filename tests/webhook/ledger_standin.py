"""Stand-ins for kube-apiserver with faults on ConfigMap writes, for the quota ledger tests.

:class:`FaultyApiserver` extends the stand-in of tests/certs (objects over HTTP with CAS updates);
:class:`ClusterApiserver` extends the list/watch stand-in of ``watch_standin.py`` with the same
ConfigMap writes, so that ``draguard serve --kubeconfig`` can both watch the cluster and keep its
ledger on one server.

kube-apiserver (and etcd) cannot be installed here. Both stand-ins enforce what the ledger depends
on: a PUT whose ``metadata.resourceVersion`` is not the stored one fails with 409 Conflict, a POST
of an existing name with 409 AlreadyExists, all under one lock (the serialisation etcd provides).
This module adds the faults a real API server shows under stress, one per ConfigMap write, in order:

* ``drop``: the write is refused with 503 and not applied (an overloaded API server);
* ``lose``: the write is applied but the answer is a 504 (the connection broke after the commit);
* ``delay``: the write waits ``delay_seconds`` before it is applied (a slow etcd), so a client with
  a shorter timeout gives up while the write still lands.
"""

from __future__ import annotations

import copy
import http.server
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.append(str(Path(__file__).resolve().parents[1] / "certs"))

from apiserver_standin import Apiserver
from watch_standin import COLLECTIONS, WatchServer, status

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


# --- list/watch plus ConfigMap writes: what ``draguard serve`` talks to ----------------------------------

CONFIGMAP = re.compile(r"^/api/v1/namespaces/([^/]+)/configmaps(?:/([^/]+))?$")


class ClusterApiserver(WatchServer):
    """The watch stand-in plus ConfigMaps: GET by name, POST (409 AlreadyExists) and PUT with a
    ``metadata.resourceVersion`` precondition (409 Conflict), on the stand-in's one version counter,
    with the same write faults as :class:`FaultyApiserver`."""

    def __init__(self) -> None:
        super().__init__(COLLECTIONS)
        self.configmaps: dict[tuple[str, str], dict[str, Any]] = {}
        self.faults: list[str] = []
        self.delay_seconds = 0.0
        self.writes = 0

    def configmap(self, method: str, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        if method == "GET":
            with self._cond:
                found = self.configmaps.get((namespace, name))
            return (
                (200, copy.deepcopy(found))
                if found
                else (404, status(404, "NotFound", f'configmaps "{name}" not found'))
            )
        with self._cond:
            self.writes += 1
            fault = self.faults.pop(0) if self.faults else None
        if fault == "drop":
            return 503, SERVICE_UNAVAILABLE
        if fault == "delay":
            time.sleep(self.delay_seconds)
        code, answer = self._write(method, namespace, name, body)
        return (504, TIMEOUT) if fault == "lose" else (code, answer)

    def _write(self, method: str, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        meta = body.setdefault("metadata", {})
        key = (namespace, meta.get("name") or name)
        with self._cond:
            current = self.configmaps.get(key)
            if method == "POST" and current is not None:
                return 409, status(409, "AlreadyExists", f'configmaps "{key[1]}" already exists')
            if method == "PUT":
                if current is None:
                    return 404, status(404, "NotFound", f'configmaps "{key[1]}" not found')
                if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
                    return 409, status(
                        409,
                        "Conflict",
                        (
                            f'Operation cannot be fulfilled on configmaps "{key[1]}": the object has been '
                            "modified; please apply your changes to the latest version and try again"
                        ),
                    )
            self.version += 1
            meta["resourceVersion"] = str(self.version)
            meta["namespace"] = namespace
            self.configmaps[key] = copy.deepcopy(body)
            return (201 if method == "POST" else 200), body

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self
        base: Any = super()._handler_class()

        class Handler(base):  # type: ignore[misc, valid-type]
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall

            def _configmap(self, method: str) -> bool:
                match = CONFIGMAP.match(urlsplit(self.path).path)
                if match is None:
                    return False
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                self._json(*server.configmap(method, match[1], match[2] or "", body))
                return True

            def do_GET(self) -> None:
                if not self._configmap("GET"):
                    super().do_GET()

            def do_POST(self) -> None:
                self._configmap("POST")

            def do_PUT(self) -> None:
                self._configmap("PUT")

        return Handler


@contextmanager
def cluster_apiserver() -> Iterator[ClusterApiserver]:
    server = ClusterApiserver()
    server.start()
    try:
        yield server
    finally:
        server.stop()
