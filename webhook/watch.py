"""Keep one resource's objects current with the API server: list, then watch from the list's version.

This is client-go's reflector, reduced to what draguard needs (upstream
``staging/src/k8s.io/client-go/tools/cache/reflector.go``):

* list page by page, remember the list's ``resourceVersion``, then watch from it with bookmarks
  (``allowWatchBookmarks``) so that a quiet resource still advances its resourceVersion and a
  reconnect does not fall out of the server's history;
* each watch asks the server to end it after a random 5 to 10 minutes, as client-go does, so the
  API server's load balancing can move watchers;
* 410 Gone (the resourceVersion has been compacted away; the API server says so with an ``ERROR``
  event, or with an HTTP 410) means re-list; every other failure (connection refused or dropped,
  timeouts, 5xx, 403) is retried after an exponential backoff with jitter, capped;
* an optional resource the cluster does not serve (404 on the list) is skipped.

Objects are trimmed of what no rule reads and can be large (``metadata.managedFields``, a node's
image list and conditions) before they are decoded with :func:`policies.api.kinds.decode`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from policies.api.base import TypedObject
from policies.api.kinds import DecodeError, decode
from policies.snapshot import Key
from webhook.kube import ApiResource, Gone, KubeError, KubeReader, NotServed, WatchStream, status_error

log = logging.getLogger(__name__)

# client-go's reflector: watches last between minWatchTimeout and twice that.
WATCH_TIMEOUT = (300, 600)
# The API server sends a bookmark about every minute (cacher.go defaultBookmarkFrequency); a watch
# that stays silent for much longer than that is treated as a dead connection.
READ_TIMEOUT = 150.0


@dataclass
class Backoff:
    """Exponential delays with jitter, never above ``cap`` (client-go: 800 ms doubling to 30 s)."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    _next: float = 0.0

    def delay(self) -> float:
        base = self._next or self.initial
        self._next = min(self.cap, base * self.factor)
        return min(self.cap, base * (1.0 + self.jitter * random.random()))

    def reset(self) -> None:
        self._next = 0.0


def _trim(resource: ApiResource, raw: dict[str, Any]) -> dict[str, Any]:
    """The object with ``apiVersion``/``kind`` set and the bulky fields nothing reads removed."""
    obj = {**raw, "apiVersion": resource.api_version, "kind": resource.kind}
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        obj["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    status = obj.get("status")
    if resource.kind == "Node" and isinstance(status, dict):
        obj["status"] = {k: v for k, v in status.items() if k in ("allocatable", "capacity")}
    return obj


def _key(raw: dict[str, Any]) -> Key:
    metadata = raw.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _version(raw: dict[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")


class Reflector:
    """One resource's objects (by namespace and name), kept current by a thread running :meth:`run`.

    ``keep`` says which decoded objects to hold at all (pods that reference claims, for instance);
    ``on_change`` is called after every change, from the reflector's thread.
    """

    def __init__(
        self,
        reader: KubeReader,
        resource: ApiResource,
        on_change: Callable[[], None],
        keep: Callable[[TypedObject], bool] = lambda _: True,
        backoff: Backoff | None = None,
        read_timeout: float = READ_TIMEOUT,
        watch_timeout: tuple[int, int] = WATCH_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resource = resource
        self._reader = reader
        self._on_change = on_change
        self._keep = keep
        self._backoff = backoff or Backoff()
        self._read_timeout = read_timeout
        self._watch_timeout = watch_timeout
        self._clock = clock
        self._items: dict[Key, TypedObject] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self.resource_version = ""
        self.listed = False
        self.skipped = False
        self.connected = False
        self.last_contact: float | None = None

    def objects(self) -> list[TypedObject]:
        with self._lock:
            return list(self._items.values())

    def fresh_as_of(self) -> float | None:
        """When this resource was last known to be current: now while a watch is open, else the
        last time the API server answered; ``None`` before the first list."""
        if self.skipped or self.connected:
            return self._clock()
        return self.last_contact

    def stop(self) -> None:
        """Make :meth:`run` return soon, interrupting a watch that is waiting for events."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def run(self) -> None:
        """List and watch until :meth:`stop`; never raises."""
        while not self._stop.is_set():
            try:
                if not self.resource_version:
                    self._list()
                self._watch()
                self._backoff.reset()
            except NotServed as err:
                if self.resource.optional and not self.listed:
                    log.info("the cluster does not serve %s (%s); not watching it", self.resource, err)
                    self.skipped = True
                    self._on_change()
                    return
                self._failed(err)
            except Gone as err:
                log.info("%s: %s; listing again", self.resource, err)
                if not self.resource_version:
                    self._failed(err)  # the list itself expired (a stale continue token): do not spin
                self.resource_version = ""
            except KubeError as err:
                self._failed(err)
            except Exception:  # a bug here must not silently stop the state from updating
                log.exception("%s: unexpected error in list/watch", self.resource)
                self._failed(None)

    def _failed(self, err: KubeError | None) -> None:
        self.connected = False
        if self._stop.is_set():
            return  # the error is our own stop() closing the stream
        delay = self._backoff.delay()
        if err is not None:
            log.warning("%s: %s; retrying in %.1fs", self.resource, err, delay)
        self._stop.wait(delay)

    def _contact(self) -> None:
        self.last_contact = self._clock()

    def _decode(self, raw: Any) -> TypedObject | None:
        if not isinstance(raw, dict):
            log.warning("%s: an item is not a JSON object; ignored", self.resource)
            return None
        try:
            return decode(_trim(self.resource, raw))
        except DecodeError as err:
            namespace, name = _key(raw)
            where = f"{namespace}/{name}" if namespace else name
            kind = self.resource.kind
            log.warning("%s %s cannot be decoded, left out of the snapshot: %s", kind, where, err)
            return None

    def _list(self) -> None:
        items: dict[Key, TypedObject] = {}
        version = ""
        for page, page_version in self._reader.list_pages(self.resource):
            self._add(items, page)
            version = page_version
            if self._stop.is_set():
                return
        with self._lock:
            self._items = items
        self.resource_version = version
        self.listed = True
        self._contact()
        self._on_change()

    def _add(self, items: dict[Key, TypedObject], raws: Iterable[Any]) -> None:
        for raw in raws:
            obj = self._decode(raw)
            if obj is not None and self._keep(obj):
                items[(obj.namespace, obj.name)] = obj

    def _watch(self) -> None:
        timeout = random.randint(*self._watch_timeout)
        stream = self._reader.watch(self.resource, self.resource_version, timeout, self._read_timeout)
        self._stream = stream
        try:
            if self._stop.is_set():
                return
            self.connected = True
            self._contact()
            for event in stream:
                self._apply(event)
                self._contact()
                if self._stop.is_set():
                    return
        finally:
            self._stream = None
            self.connected = False
            stream.close()

    def _apply(self, event: dict[str, Any]) -> None:
        kind, raw = event.get("type"), event.get("object")
        if not isinstance(raw, dict):
            raise KubeError(0, f"watch event {kind} without an object")
        if kind == "ERROR":
            raise status_error(raw)
        version = _version(raw)
        if kind == "BOOKMARK":
            self.resource_version = version or self.resource_version
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            raise KubeError(0, f"unknown watch event type {kind!r}")
        key = _key(raw)
        obj = self._decode(raw) if kind != "DELETED" else None
        with self._lock:
            if obj is not None and self._keep(obj):
                self._items[key] = obj
            else:
                self._items.pop(key, None)
        self.resource_version = version or self.resource_version
        self._on_change()
