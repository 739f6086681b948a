"""The cluster state the rules read: one immutable Snapshot, from manifest files or from the API server.

Both sources offer the same three things to the server: ``snapshot`` (a request takes it once and
keeps it), ``synced`` (readiness waits for it) and ``age()`` (seconds since the state was last known
to be current; a snapshot older than ``config.snapshot.maxAgeSeconds`` makes the rules that need it
answer per their failure policy).

:class:`ClusterState` runs one :class:`webhook.watch.Reflector` thread per resource and one builder
thread. A change marks the state dirty; the builder waits ``debounce`` seconds so that a burst of
events (a driver republishing its slices, a node drain) costs one rebuild, then builds a new
Snapshot and replaces the reference in one assignment. Requests in flight keep the old one.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Protocol

from policies.api.base import TypedObject
from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.config import Config
from policies.reading import DEFAULTS, ReadOptions
from policies.rules.drain import is_driver_pod
from policies.scheduler.cluster import is_bound
from policies.snapshot import Snapshot
from webhook.kube import ApiResource, KubeReader
from webhook.manifests import load
from webhook.watch import READ_TIMEOUT, WATCH_TIMEOUT, Backoff, Reflector

log = logging.getLogger(__name__)

RESOURCE_API = "resource.k8s.io/v1"
RESOURCES = (
    ApiResource(RESOURCE_API, "deviceclasses", "DeviceClass"),
    ApiResource(RESOURCE_API, "resourceslices", "ResourceSlice"),
    ApiResource(RESOURCE_API, "resourceclaims", "ResourceClaim"),
    ApiResource(RESOURCE_API, "resourceclaimtemplates", "ResourceClaimTemplate"),
    ApiResource("v1", "pods", "Pod"),
    ApiResource("v1", "resourcequotas", "ResourceQuota"),
    ApiResource("v1", "namespaces", "Namespace"),
    ApiResource("v1", "nodes", "Node"),
    # v1beta2 in 1.36 and behind a feature gate: a cluster without it answers 404.
    ApiResource("resource.k8s.io/v1beta2", "devicetaintrules", "DeviceTaintRule", optional=True),
)


Keep = Callable[[TypedObject], bool]


def relevance(config: Config) -> Keep:
    """Which objects the snapshot holds: every object except pods that nothing reads.

    A cluster has far more pods than DRA objects. The rules read pods that reference claims, and
    the drain rule the DRA driver pods its ``driverPodSelector`` names (they usually reference no
    claim); the dry run's scheduler filters read every pod bound to a node (its requests, host
    ports and labels are load on that node); the API server cannot filter on these, so the filter
    runs here. Pending and finished pods without claims are left out.
    """
    selector = config.rules.drain.driver_pod_selector

    def relevant(obj: TypedObject) -> bool:
        if not isinstance(obj, Pod) or obj.spec.resource_claims or is_bound(obj):
            return True
        return selector is not None and is_driver_pod(obj, selector.match_labels)

    return relevant


DEFAULT_RELEVANCE = relevance(Config())


def indexed(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with its device index built, here rather than by the first request to need it:
    rules read it inline on the event loop, where 40,000 devices would stall every request."""
    snapshot.devices  # noqa: B018 (builds the cached index)
    return snapshot


class State(Protocol):
    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def synced(self) -> bool: ...

    def age(self) -> float: ...


class FileState:
    """A snapshot read once from manifest files (``serve --state``): always synced, never stale."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    @classmethod
    def from_objects(
        cls, objects: Iterable[TypedObject], now: datetime, keep: Keep = DEFAULT_RELEVANCE
    ) -> FileState:
        """Objects defaulted as the API server would have stored them."""
        defaulted = (apply_defaults(obj, now) for obj in objects)
        return cls(indexed(Snapshot.build(obj for obj in defaulted if keep(obj))))

    @classmethod
    def load(
        cls,
        paths: Sequence[str],
        now: datetime,
        keep: Keep = DEFAULT_RELEVANCE,
        options: ReadOptions = DEFAULTS,
        say: Callable[[str], None] | None = None,
    ) -> FileState:
        """The objects of manifest files or directories, read as the offline commands read them
        (``options``: the reading flags; ``say`` is told the notes and warnings of
        :func:`webhook.manifests.load`); raises ManifestError."""
        return cls.from_objects((loaded.obj for loaded in load(paths, options, say=say)), now, keep)

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def synced(self) -> bool:
        return True

    def age(self) -> float:
        return 0.0


class ClusterState:
    """The snapshot of a live cluster, kept current by list/watch (see the module docstring)."""

    def __init__(
        self,
        reader: KubeReader,
        resources: Sequence[ApiResource] = RESOURCES,
        keep: Keep = DEFAULT_RELEVANCE,
        debounce: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        backoff: Callable[[], Backoff] = Backoff,
        read_timeout: float = READ_TIMEOUT,
        watch_timeout: tuple[int, int] = WATCH_TIMEOUT,
    ) -> None:
        self._debounce = debounce
        self._clock = clock
        self._snapshot = Snapshot()
        self._synced = False
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rebuilds = 0
        self.reflectors = [
            Reflector(
                reader,
                r,
                self._dirty.set,
                keep=keep,
                backoff=backoff(),
                read_timeout=read_timeout,
                watch_timeout=watch_timeout,
                clock=clock,
            )
            for r in resources
        ]

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def synced(self) -> bool:
        return self._synced

    def age(self) -> float:
        """Seconds since the least recently confirmed resource was known current (inf before sync)."""
        if not self._synced:
            return math.inf
        now = self._clock()
        times = [r.fresh_as_of() for r in self.reflectors]
        return max(0.0, now - min(t if t is not None else -math.inf for t in times))

    def start(self) -> None:
        for reflector in self.reflectors:
            self._spawn(reflector.run, f"draguard-watch-{reflector.resource.plural}")
        self._spawn(self._build_loop, "draguard-snapshot")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._dirty.set()
        for reflector in self.reflectors:
            reflector.stop()
        deadline = self._clock() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - self._clock()))

    def _build_loop(self) -> None:
        # stop() sets _stopping before _dirty, so checking it at the top of each round cannot miss it.
        while not self._stopping.is_set():
            self._dirty.wait()
            if self._stopping.wait(self._debounce):  # let the rest of a burst arrive
                return
            self._dirty.clear()
            try:
                self._rebuild()
            except Exception:  # keep serving the previous snapshot rather than stop updating
                log.exception("rebuilding the snapshot failed; keeping the previous one")

    def _rebuild(self) -> None:
        listed = all(r.listed or r.skipped for r in self.reflectors)
        objects = itertools.chain.from_iterable(r.objects() for r in self.reflectors)
        self._snapshot = indexed(Snapshot.build(objects))
        self.rebuilds += 1
        if listed and not self._synced:
            self._synced = True
            counts = ", ".join(
                f"{len(r.objects())} {r.resource.plural}" for r in self.reflectors if not r.skipped
            )
            log.info("cluster state synced: %s", counts)
