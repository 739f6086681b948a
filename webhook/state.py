"""The cluster state the rules read: one immutable Snapshot, from manifest files or from the API server.

Both sources offer the same three things to the server: ``snapshot`` (a request takes it once and
keeps it), ``synced`` (readiness waits for it) and ``age()`` (seconds since the state was last known
to be current; a snapshot older than ``config.snapshot.maxAgeSeconds`` makes the rules that need it
answer per their failure policy).

Both read objects the same way (:class:`policies.stored.Reader`: trimmed, compact, pods as
records) into a :class:`policies.store.Store`, object by object. :class:`ClusterState` runs one
:class:`webhook.watch.Reflector` thread per resource, which applies each event to the store as it
arrives, and one publisher thread: a change marks the state dirty, the publisher waits
``debounce`` seconds so that a burst of events (a driver republishing its slices, a node drain)
is published once, then swaps in the store's new Snapshot in one assignment. Requests in flight
keep the old one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from policies.api.base import TypedObject
from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import DecodeError
from policies.config import Config
from policies.priority import Priorities, PriorityRefused, admitted
from policies.reading import DEFAULTS, ReadOptions, read
from policies.rules.drain import is_driver_pod
from policies.scheduler.podinfo import PodInfo
from policies.snapshot import Key, Snapshot
from policies.store import Store, key_of
from policies.stored import KeepPod, Reader, trim
from policies.validation.documents import judge_existing
from webhook.kube import ApiResource, KubeError, KubeReader
from webhook.manifests import Document, ManifestError, Unreadable, iter_inputs
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
    ApiResource("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass"),
    # v1beta2 in 1.36 and behind a feature gate: a cluster without it answers 404.
    ApiResource("resource.k8s.io/v1beta2", "devicetaintrules", "DeviceTaintRule", optional=True),
)


def relevance(config: Config) -> KeepPod:
    """Which pods the snapshot holds: the pods something reads.

    A cluster has far more pods than DRA objects. The rules read pods that reference claims, and
    the drain rule the DRA driver pods its ``driverPodSelector`` names (they usually reference no
    claim); the dry run's scheduler filters read every pod bound to a node (its requests, host
    ports and labels are load on that node); the API server cannot filter on these, so the filter
    runs here. Pending and finished pods without claims are left out.
    """
    selector = config.rules.drain.driver_pod_selector

    def relevant(pod: PodInfo) -> bool:
        if pod.shape.spec.resource_claims or pod.bound:
            return True
        return selector is not None and is_driver_pod(pod.labels, selector.match_labels)

    return relevant


DEFAULT_RELEVANCE = relevance(Config())


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
        cls, objects: Iterable[TypedObject], now: datetime, keep: KeepPod = DEFAULT_RELEVANCE
    ) -> FileState:
        """Objects as the API server would have stored them: defaulted, each pod's priority
        resolved from its PriorityClass; ManifestError for pods it would refuse."""
        stored, refused = admitted([apply_defaults(obj, now) for obj in objects])
        if refused:
            raise ManifestError("\n".join(refused))
        store = Store()
        for obj in stored:
            _put(store, obj, keep)
        return cls(store.snapshot())

    @classmethod
    def load(
        cls,
        paths: Sequence[str],
        now: datetime,
        keep: KeepPod = DEFAULT_RELEVANCE,
        options: ReadOptions = DEFAULTS,
        say: Callable[[str], None] = log.warning,
    ) -> FileState:
        """The objects of manifest files or directories (:func:`read_state`; ``say`` is told its
        notes and warnings)."""
        return cls(read_state(paths, now, keep, options, say)[0].snapshot())

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def synced(self) -> bool:
        return True

    def age(self) -> float:
        return 0.0


def read_state(
    paths: Sequence[str],
    now: datetime,
    keep: KeepPod = DEFAULT_RELEVANCE,
    options: ReadOptions = DEFAULTS,
    say: Callable[[str], None] = log.warning,
) -> tuple[Store, Reader]:
    """A store of the objects of manifest files or directories (``options``: the reading flags),
    read one document at a time, and the reader that read them (it knows the pod shapes seen);
    raises ManifestError listing every problem.

    The objects of the kinds and versions the live state lists (:data:`RESOURCES`) are a cluster's
    stored objects: they are read as list/watch reads them (:class:`Reader`: decoded, trimmed,
    compact), defaulted, and not validated at all (an existing object is what the scheduler reads,
    valid or not, and validating 100,000 pods would cost more than reading them). Other documents
    (older versions, other kinds) are read as the offline commands read them, and what validation
    says of them, as of objects the cluster holds (:func:`judge_existing`), is told to ``say``. A
    later document naming the same object replaces the earlier one, as ``kubectl apply`` would;
    ``say`` is told both places."""
    loading = _Loading(Store(), Reader(keep, now), options, keep, say)
    for item in iter_inputs(paths, recursive=True, keys=False):
        if isinstance(item, Unreadable):
            loading.problems.append(item.message)
        else:
            loading.document(item)
    loading.admit_written_pods()
    if loading.problems:
        raise ManifestError("\n".join(loading.problems))
    return loading.store, loading.reader


def _put(store: Store, obj: TypedObject, keep: KeepPod) -> None:
    if not isinstance(obj, Pod):
        store.put(obj)
        return
    info = PodInfo.of(obj)
    if keep(info):
        store.put_pod(info, obj)


_STORED = frozenset((r.api_version, r.kind) for r in RESOURCES)


def _is_stored(raw: Any) -> bool:
    """A document of a kind and version the live state lists."""
    return isinstance(raw, dict) and (raw.get("apiVersion"), raw.get("kind")) in _STORED


def _stored_pod(raw: dict[str, Any]) -> bool:
    """A pod as the API server stores it (a cluster dump): created, its priority set by admission;
    a pod as written (a hand-made state) is admitted once every PriorityClass is read."""
    metadata, spec = raw.get("metadata"), raw.get("spec")
    return (
        isinstance(metadata, dict)
        and isinstance(spec, dict)
        and bool(metadata.get("creationTimestamp"))
        and spec.get("priority") is not None
    )


@dataclass
class _Loading:
    """A state being read document by document (:func:`read_state`)."""

    store: Store
    reader: Reader
    options: ReadOptions
    keep: KeepPod
    say: Callable[[str], None]
    problems: list[str] = field(default_factory=list)
    seen: dict[tuple[str, Key], str] = field(default_factory=dict)
    written: list[tuple[dict[str, Any], str]] = field(default_factory=list)

    def document(self, document: Document) -> None:
        """One document into the store; what is wrong with it into ``problems``."""
        raw, where = document.raw, str(document.source)
        if not _is_stored(raw):
            self._read(raw, where)
        elif raw["kind"] == "Pod" and not _stored_pod(raw):
            self.written.append((raw, where))
        else:
            try:
                found = self.reader.pod(raw) if raw["kind"] == "Pod" else self.reader.object(raw)
            except DecodeError as err:
                self.problems += [f"{where}: {raw['kind']}: {problem}" for problem in err.problems]
                return
            if isinstance(found, tuple):
                self._note(where, "Pod", key_of(found[0]))
                self.store.put_pod(*found)
            elif found is not None:
                self._note(where, raw["kind"], key_of(found))
                self.store.put(found)

    def _read(self, raw: Any, where: str) -> None:
        reading = read(trim(raw) if isinstance(raw, dict) else raw, self.options)
        if reading.errors:
            self.problems += [f"{where}: {reading.label}: {e}" for e in reading.errors]
            return
        for line in judge_existing(reading, allow_privileged=self.options.allow_privileged):
            self.say(f"warning: {where}: {reading.label}: {line}")
        if reading.obj is not None and reading.template is None:
            obj = self.reader.stored(reading.obj)
            self._note(where, reading.kind, key_of(obj))
            self.store.put(obj)

    def admit_written_pods(self) -> None:
        """The pods as written, admitted as the API server's Priority plugin would (the classes
        the state holds, read in order), then stored."""
        classes = self.store.snapshot().priority_classes.values()
        priorities = Priorities.among(classes)
        for raw, where in self.written:
            try:
                pod = priorities.stored(self.reader.written_pod(raw))
            except DecodeError as err:
                self.problems += [f"{where}: Pod: {problem}" for problem in err.problems]
                continue
            except PriorityRefused as err:
                self.problems.append(f"{where}: {err}")
                continue
            self._note(where, "Pod", key_of(PodInfo.of(pod)))
            _put(self.store, pod, self.keep)

    def _note(self, where: str, kind: str, key: Key) -> None:
        """Remember where an object was read; a second document naming it replaces the first."""
        earlier = self.seen.setdefault((kind, key), where)
        if earlier != where:
            name = f"{key[0]}/{key[1]}" if key[0] else key[1]
            self.say(
                f"note: {where}: {kind} {name} replaces the one in {earlier} (the later document wins, "
                "as with kubectl apply)"
            )
            self.seen[(kind, key)] = where


class ListFailed(Exception):
    """A resource's list failed (:meth:`ClusterState.list_once`): which one, and the API server's
    error."""

    def __init__(self, resource: ApiResource, error: KubeError) -> None:
        super().__init__(f"cannot list {resource}: {error}")
        self.resource = resource
        self.error = error


def list_state(
    reader: KubeReader, resources: Sequence[ApiResource] = RESOURCES, keep: KeepPod = DEFAULT_RELEVANCE
) -> tuple[Store, Reader]:
    """The cluster read once, as ``serve`` reads it before it watches (:meth:`ClusterState.list_once`):
    a store the caller may go on writing to, and the reader that decoded it."""
    return ClusterState(reader, resources, keep).list_once()


def write_over(store: Store, reader: Reader, objects: Iterable[TypedObject]) -> None:
    """``objects`` (as the API server would store them: defaulted, pods admitted) written over the
    store's objects of the same keys, or added, as ``kubectl apply`` of them would leave the
    cluster. Every pod is kept, whatever the store's relevance: it is a question."""
    for obj in objects:
        if isinstance(obj, Pod):
            store.put_pod(PodInfo.of(obj), obj)
        else:
            store.put(reader.stored(obj))


class ClusterState:
    """The snapshot of a live cluster, kept current by list/watch (see the module docstring).

    The reflectors' threads decode what they receive on their own, then apply it to the store
    under a lock held for the change alone; the publisher takes the same lock to publish."""

    def __init__(
        self,
        reader: KubeReader,
        resources: Sequence[ApiResource] = RESOURCES,
        keep: KeepPod = DEFAULT_RELEVANCE,
        debounce: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        backoff: Callable[[], Backoff] = Backoff,
        read_timeout: float = READ_TIMEOUT,
        watch_timeout: tuple[int, int] = WATCH_TIMEOUT,
    ) -> None:
        self._debounce = debounce
        self._clock = clock
        self._store = Store()
        self._decoder = Reader(keep)
        self._lock = threading.Lock()
        self._snapshot = Snapshot()
        self._synced = False
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.publishes = 0
        self.reflectors = [
            Reflector(
                reader,
                r,
                self,
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

    # --- what the reflectors call (webhook.watch.Sink) ---------------------------------------------

    def version(self, kind: str, key: Key) -> str | None:
        with self._lock:
            return self._store.version(kind, key)

    def apply(self, kind: str, key: Key, raw: dict[str, Any] | None) -> None:
        """An object as the API server has it now (None: deleted), decoded here, on the caller's
        thread; one that cannot be decoded is left out and named in the log."""
        try:
            found = None if raw is None else self._decoded(kind, raw)
        except DecodeError as err:
            where = f"{key[0]}/{key[1]}" if key[0] else key[1]
            log.warning("%s %s cannot be decoded, left out of the snapshot: %s", kind, where, err)
            found = None
        with self._lock:
            if found is None:
                self._store.delete(kind, key)
            elif isinstance(found, tuple):
                self._store.put_pod(*found)
            else:
                self._store.put(found)
        self._dirty.set()

    def _decoded(self, kind: str, raw: dict[str, Any]) -> TypedObject | tuple[PodInfo, Pod | None] | None:
        return self._decoder.pod(raw) if kind == "Pod" else self._decoder.object(raw)

    def retain(self, kind: str, keys: Iterable[Key]) -> None:
        with self._lock:
            self._store.retain(kind, keys)
        self._dirty.set()

    def skipped(self) -> None:
        self._dirty.set()

    # --- threads -----------------------------------------------------------------------------

    def list_once(self) -> tuple[Store, Reader]:
        """Every resource listed once, each on a thread of its own as :meth:`start` lists them, and
        no watch; the store and the reader that filled it, now the caller's (no thread is left).
        Raises :class:`ListFailed` for the first resource (in :data:`RESOURCES` order) whose list
        failed."""
        failed: dict[int, ListFailed] = {}

        def list_one(i: int, reflector: Reflector) -> None:
            try:
                reflector.list_once()
            except KubeError as err:
                failed[i] = ListFailed(reflector.resource, err)
                for other in self.reflectors:  # the answer is an error now: stop the other lists
                    other.stop()

        threads = [
            threading.Thread(
                target=list_one, args=(i, r), name=f"draguard-list-{r.resource.plural}", daemon=True
            )
            for i, r in enumerate(self.reflectors)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failed:
            raise failed[min(failed)]
        return self._store, self._decoder

    def start(self) -> None:
        for reflector in self.reflectors:
            self._spawn(reflector.run, f"draguard-watch-{reflector.resource.plural}")
        self._spawn(self._publish_loop, "draguard-snapshot")

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

    def _publish_loop(self) -> None:
        # stop() sets _stopping before _dirty, so checking it at the top of each round cannot miss it.
        while not self._stopping.is_set():
            self._dirty.wait()
            if self._stopping.wait(self._debounce):  # let the rest of a burst arrive
                return
            self._dirty.clear()
            try:
                self._publish()
            except Exception:  # keep serving the previous snapshot rather than stop updating
                log.exception("publishing the snapshot failed; keeping the previous one")

    def _publish(self) -> None:
        listed = all(r.listed or r.skipped for r in self.reflectors)
        with self._lock:
            self._snapshot = self._store.snapshot()
            counts = {kind: self._store.count(kind) for kind in (r.resource.kind for r in self.reflectors)}
        self.publishes += 1
        if listed and not self._synced:
            self._synced = True
            plurals = {r.resource.kind: r.resource.plural for r in self.reflectors if not r.skipped}
            log.info("cluster state synced: %s", ", ".join(f"{counts[k]} {p}" for k, p in plurals.items()))
