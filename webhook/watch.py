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

The reflector keeps no objects of its own: it hands each one to its :class:`Sink` (the cluster
state's store), which decodes and keeps it. A re-list hands over only the objects whose
``resourceVersion`` changed (the sink has the others already), then tells the sink which keys it
saw, so that a 410 costs what changed meanwhile, not a second copy of the cluster.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from policies.snapshot import Key
from webhook.kube import ApiResource, Gone, KubeError, KubeReader, NotServed, WatchStream, status_error

log = logging.getLogger(__name__)

# How long a watch asks to last (client-go's reflector: 5 to 10 minutes). Shorter than READ_TIMEOUT
# here: the API server sends a quiet resource's watch nothing, no bookmark either, until it ends it
# (the soak's DeviceClass and PriorityClass watches timed out every 150 s, each time counted a
# failure with a growing backoff, the snapshot stale until they were back); ended by the server,
# such a watch is current to its last moment and is started again at once.
WATCH_TIMEOUT = (60, 120)
# A watch silent this long, longer than any asks to last, is a dead connection: the server would
# have ended it.
READ_TIMEOUT = 150.0


@dataclass
class Backoff:
    """Exponential delays with jitter, never above ``cap``, started over when the last delay began
    more than ``reset_after`` ago (client-go's reflector: 800 ms doubling to 30 s, reset after two
    minutes without one, ``staging/src/k8s.io/client-go/tools/cache/reflector.go``). Without the
    reset, a watch cut long after an API server restart waited out the delays the restart had grown
    to (a snapshot stale for 19.5 s in the soak, where a first retry comes within 1.6 s)."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    reset_after: float = 120.0
    clock: Callable[[], float] = time.monotonic
    _next: float = 0.0
    _last: float | None = None

    def delay(self) -> float:
        now = self.clock()
        if self._last is not None and now - self._last > self.reset_after:
            self._next = 0.0
        self._last = now
        base = self._next or self.initial
        self._next = min(self.cap, base * self.factor)
        return min(self.cap, base * (1.0 + self.jitter * random.random()))

    def reset(self) -> None:
        self._next = 0.0


class Sink(Protocol):
    """Where a reflector's objects go (:class:`webhook.state.ClusterState`)."""

    def version(self, kind: str, key: Key) -> str | None:
        """The resourceVersion of the object held for ``key``, None when none is."""

    def apply(self, kind: str, key: Key, raw: dict[str, Any] | None) -> None:
        """The object as it is now (None: deleted)."""

    def retain(self, kind: str, keys: Iterable[Key]) -> None:
        """A list is complete: objects of ``kind`` not in ``keys`` are gone."""

    def skipped(self) -> None:
        """The resource is not served; nothing will come."""


def _key(raw: dict[str, Any]) -> Key:
    metadata = raw.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _version(raw: dict[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")


class Reflector:
    """One resource kept current in a :class:`Sink` by a thread running :meth:`run`."""

    def __init__(
        self,
        reader: KubeReader,
        resource: ApiResource,
        sink: Sink,
        backoff: Backoff | None = None,
        read_timeout: float = READ_TIMEOUT,
        watch_timeout: tuple[int, int] = WATCH_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resource = resource
        self._reader = reader
        self._sink = sink
        self._backoff = backoff or Backoff()
        self._read_timeout = read_timeout
        self._watch_timeout = watch_timeout
        self._clock = clock
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self.resource_version = ""
        self.listed = False
        self.skipped = False
        self.connected = False
        self.last_contact: float | None = None

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
                    self._skip(err)
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
                if self._stop.is_set():
                    return  # stop() closed the stream under a read: http.client then fails as it may
                log.exception("%s: unexpected error in list/watch", self.resource)
                self._failed(None)

    def list_once(self) -> None:
        """One list into the sink and no watch: a cluster read once (``allocate --kubeconfig``), as
        :meth:`run` lists it first. An optional resource the cluster does not serve is skipped as
        :meth:`run` skips it; any other failure is raised."""
        try:
            self._list()
        except NotServed as err:
            if not self.resource.optional:
                raise
            self._skip(err)

    def _skip(self, err: NotServed) -> None:
        log.info("the cluster does not serve %s (%s); not reading it", self.resource, err)
        self.skipped = True
        self._sink.skipped()

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

    def _raw(self, raw: Any) -> dict[str, Any] | None:
        """An item with ``apiVersion``/``kind`` set (list items carry none); None, logged, for an
        item that is not a JSON object."""
        if not isinstance(raw, dict):
            log.warning("%s: an item is not a JSON object; ignored", self.resource)
            return None
        return {**raw, "apiVersion": self.resource.api_version, "kind": self.resource.kind}

    def _list(self) -> None:
        """List page by page; each item handed to the sink as it is read, unless the sink holds it
        at the same resourceVersion already (a re-list after a 410 or a dropped watch)."""
        kind = self.resource.kind
        seen: set[Key] = set()
        changed = 0
        version = ""
        for page, page_version in self._reader.list_pages(self.resource):
            items: list[Any] = page
            for i in range(len(items)):
                raw, items[i] = self._raw(items[i]), None  # the page lets go of each item in turn
                if raw is None:
                    continue
                key = _key(raw)
                seen.add(key)
                held = self._sink.version(kind, key)
                if not held or held != _version(raw):
                    self._sink.apply(kind, key, raw)
                    changed += 1
            version = page_version
            if self._stop.is_set():
                return
        self._sink.retain(kind, seen)
        self.resource_version = version
        if self.listed:  # what a re-list cost: the objects that changed while the watch was down
            log.info("%s listed again: %d objects, %d new or changed", self.resource, len(seen), changed)
        self.listed = True
        self._contact()

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
            self._contact()  # ended by the API server: everything until now was sent
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
        raw = self._raw(raw)
        if raw is not None:
            self._sink.apply(self.resource.kind, _key(raw), None if kind == "DELETED" else raw)
        self.resource_version = version or self.resource_version
