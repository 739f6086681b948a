"""A stand-in for the list/watch side of kube-apiserver on 127.0.0.1, for tests only.

The reflector is tested against the real API server (``tests/kube``) wherever it can show the case;
this serves the three it cannot be made to on demand: a bookmark sent now followed by every watch cut
mid-stream, an object draguard cannot decode (the real one validates what it stores), and a 410 after
changes whose watch events were compacted away, each change known (a test counts what the re-list
decodes; the real one's 410 is shown by ``tests/kube/test_e2e_state.py``). It is faithful where the
reflector depends on the API server's behaviour:

* one resourceVersion counter across every resource, like etcd's revision; each write bumps it and
  the object carries it in ``metadata.resourceVersion``;
* list: ``{kind: <Kind>List, metadata: {resourceVersion}, items}`` with items that carry no
  apiVersion/kind (the API server leaves them off list items);
* watch (``?watch=true&resourceVersion=N``): HTTP/1.1 chunked transfer, one JSON event per line,
  every change after N in order, ``BOOKMARK`` events (an object with only ``metadata.resourceVersion``)
  only when ``allowWatchBookmarks=true``, the stream ends cleanly after ``timeoutSeconds``;
* an unknown collection is a 404 ``NotFound`` Status;
* a watch whose history was compacted away ends with an ``ERROR`` event carrying a 410 ``Expired``
  Status (the message kube-apiserver's watch cache sends: "too old resource version").

It is not an API server: no auth, no selectors, no pagination, no writes over HTTP.
"""

from __future__ import annotations

import copy
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Collection:
    api_version: str
    plural: str
    kind: str

    @property
    def path(self) -> str:
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{root}/{self.plural}"


@dataclass
class Event:
    version: int
    type: str
    collection: Collection | None  # None: a bookmark for every watch
    obj: dict[str, Any] = field(default_factory=dict)


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (the reflector stopping, a dropped watch) are not test failures."""


class WatchServer:
    """Objects by collection, an event history, and an HTTP server in front of them."""

    def __init__(self, collections: list[Collection]) -> None:
        self.collections = {c.path: c for c in collections}
        self.version = 1
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {c.path: {} for c in collections}
        self.events: list[Event] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._cond = threading.Condition()
        self._dropped = 0  # generation counter: watches opened before a drop are cut off
        self._sockets: set[socket.socket] = set()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- what tests do -----------------------------------------------------------------------------

    def collection(self, kind: str) -> Collection:
        return next(c for c in self.collections.values() if c.kind == kind)

    def put(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace (ADDED or MODIFIED), stamping a new resourceVersion."""
        c = self.collection(kind)
        stored = {k: v for k, v in copy.deepcopy(obj).items() if k not in ("apiVersion", "kind")}
        meta = stored.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        with self._cond:
            self.version += 1
            meta["resourceVersion"] = str(self.version)
            kind_of_change = "MODIFIED" if key in self.objects[c.path] else "ADDED"
            self.objects[c.path][key] = stored
            self.events.append(Event(self.version, kind_of_change, c, stored))
            self._cond.notify_all()
        return stored

    def expire(self, kind: str, changes: dict[tuple[str, str], dict[str, Any] | None]) -> None:
        """Changes to ``kind`` (None: deleted) whose events etcd compacted away: applied without
        events, then every watch of ``kind`` open from an older resourceVersion gets a 410."""
        c = self.collection(kind)
        with self._cond:
            watched_from = self.version
            for key, obj in changes.items():
                self.version += 1
                if obj is None:
                    self.objects[c.path].pop(key, None)
                    continue
                stored = {k: v for k, v in copy.deepcopy(obj).items() if k not in ("apiVersion", "kind")}
                stored.setdefault("metadata", {})["resourceVersion"] = str(self.version)
                self.objects[c.path][key] = stored
            message = f"too old resource version: {watched_from} ({self.version})"
            self.events.append(Event(self.version, "ERROR", c, status(410, "Expired", message)))
            self._cond.notify_all()

    def bookmark(self) -> None:
        """Every open watch that asked for bookmarks gets one at the current resourceVersion."""
        with self._cond:
            self.events.append(Event(self.version, "BOOKMARK", None))
            self._cond.notify_all()

    def drop_watches(self) -> None:
        """Cut every open watch connection mid-stream, as a failing load balancer would."""
        with self._cond:
            self._dropped += 1
            for sock in list(self._sockets):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._cond.notify_all()

    def watch_versions(self, plural: str) -> list[str]:
        """The resourceVersion each watch of ``plural`` started from, in order."""
        return [q.get("resourceVersion", "") for p, q in self.requests if p.endswith(plural) and "watch" in q]

    def lists(self, plural: str) -> int:
        """How many list requests (pages) were made for ``plural``."""
        return sum(1 for p, q in self.requests if p.endswith(plural) and "watch" not in q)

    # --- the protocol ------------------------------------------------------------------------------

    def _list(self, c: Collection) -> tuple[int, dict[str, Any]]:
        with self._cond:
            items = [copy.deepcopy(o) for _, o in sorted(self.objects[c.path].items())]
            meta = {"resourceVersion": str(self.version)}
        return 200, {"kind": f"{c.kind}List", "apiVersion": c.api_version, "metadata": meta, "items": items}

    def _events_after(
        self, c: Collection, version: int, cursor: int, bookmarks: bool
    ) -> list[dict[str, Any]]:
        out = []
        for event in self.events[cursor:]:
            if event.type == "BOOKMARK":
                if bookmarks:
                    obj = {
                        "kind": c.kind,
                        "apiVersion": c.api_version,
                        "metadata": {"resourceVersion": str(event.version)},
                    }
                    out.append({"type": "BOOKMARK", "object": obj})
            elif event.collection == c and event.version > version:
                out.append(
                    {"type": event.type, "object": {"apiVersion": c.api_version, "kind": c.kind, **event.obj}}
                )
        return out

    def _watch(
        self, handler: http.server.BaseHTTPRequestHandler, c: Collection, query: dict[str, str]
    ) -> None:
        version = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        deadline = time.monotonic() + int(query.get("timeoutSeconds") or 1800)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        with self._cond:
            generation = self._dropped
            self._sockets.add(handler.connection)
            lines = self._events_after(c, version, 0, bookmarks)
            cursor = len(self.events)
        try:
            while True:
                for line in lines:
                    data = json.dumps(line).encode() + b"\n"
                    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                handler.wfile.flush()
                with self._cond:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._dropped != generation:
                        break
                    self._cond.wait(min(remaining, 0.5))
                    if self._dropped != generation:
                        handler.close_connection = True
                        return  # cut off: no terminating chunk
                    lines = self._events_after(c, version, cursor, bookmarks)
                    cursor = len(self.events)
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            handler.close_connection = True
        finally:
            with self._cond:
                self._sockets.discard(handler.connection)

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                server.requests.append((parts.path, query))
                c = server.collections.get(parts.path)
                if c is None:
                    self._json(
                        404, status(404, "NotFound", "the server could not find the requested resource")
                    )
                elif query.get("watch") in ("true", "1"):
                    server._watch(self, c, query)
                else:
                    self._json(*server._list(c))

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.drop_watches()
        self._server.shutdown()
        self._server.server_close()


DRA = "resource.k8s.io/v1"
COLLECTIONS = [
    Collection(DRA, "deviceclasses", "DeviceClass"),
    Collection(DRA, "resourceslices", "ResourceSlice"),
    Collection(DRA, "resourceclaims", "ResourceClaim"),
    Collection(DRA, "resourceclaimtemplates", "ResourceClaimTemplate"),
    Collection("v1", "pods", "Pod"),
    Collection("v1", "resourcequotas", "ResourceQuota"),
    Collection("v1", "namespaces", "Namespace"),
    Collection("v1", "nodes", "Node"),
    Collection("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass"),
    # devicetaintrules (resource.k8s.io/v1beta2) is deliberately not served: a 1.36 cluster without
    # the DRADeviceTaints gate answers 404 for it.
]


@contextmanager
def running(collections: list[Collection] = COLLECTIONS) -> Iterator[WatchServer]:
    server = WatchServer(collections)
    server.start()
    try:
        yield server
    finally:
        server.stop()
