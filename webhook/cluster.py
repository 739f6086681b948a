"""A cluster read once, read-only, for ``allocate`` and ``validate`` given ``--kubeconfig``/``--context``.

What is read, and how:

* the state the dry run reads, listed through the reader ``serve`` uses (:func:`webhook.state.list_state`:
  paginated, the kinds of :data:`webhook.state.RESOURCES`, each object decoded, trimmed and kept
  as the snapshot keeps it), once and without a watch;
* the object each document names, as ``kubectl apply`` fetches it before it chooses between a
  create and a patch (upstream ``staging/src/k8s.io/cli-runtime/pkg/resource/visitor.go``,
  ``Info.Get``): a GET, decoded whole, so that an update is judged against the object stored;
* the documents' namespaces (GET): their labels (admin access) and whether the API server would
  take objects into them at all.

Nothing is ever written. Every failure is one line (:class:`ClusterError`); a request the
credentials may not make names the resource and the verb, and the chart's ClusterRole that grants
every read made here.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from policies.api.base import TypedObject
from policies.api.core import Namespace
from policies.api.kinds import DecodeError, decode
from policies.priority import forbidden
from policies.reading import Reading
from policies.store import Store
from policies.stored import KeepPod, Reader
from policies.validation.documents import Identity, identity
from webhook.kube import ApiResource, ConnectError, KubeContext, KubeError, KubeReader, connect_kubeconfig
from webhook.state import DEFAULT_RELEVANCE, RESOURCES, ListFailed, list_state

# The ClusterRole of the chart (charts/draguard/templates/rbac.yaml, for the release "draguard")
# that grants every read allocate and validate make of a cluster, and nothing else.
READER_ROLE = "draguard-reader"
FORBIDDEN = 403

_BY_KIND = {(r.api_version.rpartition("/")[0], r.kind): r for r in RESOURCES}
_NAMESPACES = _BY_KIND[("", "Namespace")]
TERMINATING = "Terminating"


class ClusterError(Exception):
    """The cluster cannot be read (exit code 2); the message is one line."""


@dataclass(frozen=True)
class Listed:
    """The cluster's state as listed: a store (the caller writes the documents' objects over it),
    the reader that decoded it, how many objects of each resource it holds, and how long it took."""

    store: Store
    reader: Reader
    counts: Mapping[str, int]
    seconds: float


@dataclass(frozen=True)
class Known:
    """What the cluster holds of a set of documents: the objects they name (an apply of those is an
    update) and the namespaces they go to that exist."""

    stored: Mapping[Identity, TypedObject]
    namespaces: Mapping[str, Namespace]

    def with_namespaces(self, namespaces: Iterable[Namespace]) -> Known:
        """The cluster once ``namespaces`` (the input's) are applied: created, or updated."""
        return replace(self, namespaces={**self.namespaces, **{ns.name: ns for ns in namespaces}})

    def labels(self) -> dict[str, dict[str, str]]:
        """The labels of each namespace that exists."""
        return {name: dict(ns.metadata.labels or {}) for name, ns in self.namespaces.items()}

    def stored_as(self, reading: Reading) -> TypedObject | None:
        """The stored object the document names (its write is then an update), None when none."""
        key = identity(reading)
        return self.stored.get(key) if key is not None else None

    def lifecycle_refusal(self, reading: Reading) -> str | None:
        """The NamespaceLifecycle admission plugin's refusal of the document's write, in the API
        server's words (upstream ``staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/
        lifecycle/admission.go``): a namespace that does not exist, or a create into a namespace
        being deleted."""
        key = identity(reading)
        if key is None or not key[2]:
            return None
        namespace = self.namespaces.get(key[2])
        if namespace is None:
            return f'namespaces "{key[2]}" not found'
        if key in self.stored or _phase(namespace) != TERMINATING:
            return None
        why = f"unable to create new content in namespace {key[2]} because it is being terminated"
        return forbidden(_group_resource(key), key[3], why)


def _phase(namespace: Namespace) -> str:
    status = (namespace.model_extra or {}).get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return phase if isinstance(phase, str) else ""


def _group_resource(key: Identity) -> str:
    """``resourceclaims.resource.k8s.io``, ``pods``: how the API server names a resource in errors."""
    resource = _BY_KIND.get(key[:2])
    plural = resource.plural if resource is not None else key[1].lower() + "s"
    return f"{plural}.{key[0]}" if key[0] else plural


@dataclass(frozen=True)
class Cluster:
    """The cluster of a kubeconfig context, asked through one client."""

    reader: KubeReader
    context: KubeContext
    server: str

    @classmethod
    def connect(cls, kubeconfig: str | None, context: str | None) -> Cluster:
        try:
            api, chosen = connect_kubeconfig(kubeconfig, context)
        except ConnectError as err:
            raise ClusterError(str(err)) from None
        return cls(KubeReader(api), chosen, str(api.configuration.host))

    @property
    def where(self) -> str:
        return f"context {self.context.name} ({self.server})"

    def listed(self, kinds: Collection[str] | None = None, keep: KeepPod = DEFAULT_RELEVANCE) -> Listed:
        """The ``kinds`` (default: every kind the dry run reads) listed once; ``counts`` has the
        resources listed (an optional one the cluster does not serve among them, with 0)."""
        resources = [r for r in RESOURCES if kinds is None or r.kind in kinds]
        started = time.monotonic()
        try:
            store, reader = list_state(self.reader, resources, keep)
        except ListFailed as err:
            raise ClusterError(self._failure("list", err.resource, err.error)) from None
        counts = {r.plural: store.count(r.kind) for r in resources}
        return Listed(store, reader, counts, time.monotonic() - started)

    def known(self, readings: Iterable[Reading]) -> Known:
        """The stored object of each document of a kind the cluster state holds (other kinds, such
        as workloads, are judged as creates), and the documents' namespaces that exist."""
        stored: dict[Identity, TypedObject] = {}
        namespaces: dict[str, Namespace] = {}
        for reading in readings:
            key = identity(reading)
            if key is None:
                continue
            resource = _BY_KIND.get(key[:2])
            if resource is not None and key not in stored:
                found = self._get(resource, key[2], key[3])
                if found is not None:
                    stored[key] = found
            if key[2] and key[2] not in namespaces:
                namespace = self._get(_NAMESPACES, "", key[2])
                if isinstance(namespace, Namespace):
                    namespaces[key[2]] = namespace
        return Known(stored, namespaces)

    def _get(self, resource: ApiResource, namespace: str, name: str) -> TypedObject | None:
        try:
            raw = self.reader.get(resource, namespace, name)
        except KubeError as err:
            raise ClusterError(self._failure("get", resource, err)) from None
        if raw is None:
            return None
        try:
            return decode(raw)
        except DecodeError as err:
            shown = f"{namespace}/{name}" if namespace else name
            raise ClusterError(f"{self.where}: {resource.kind} {shown} cannot be decoded: {err}") from None

    def _failure(self, verb: str, resource: ApiResource, err: KubeError) -> str:
        """One line: what could not be read and why; for a forbidden request, the verb and the
        resource, and the role that grants them."""
        group = resource.api_version.rpartition("/")[0]
        what = f"{resource.plural}.{group}" if group else resource.plural
        if err.status == FORBIDDEN:
            return (
                f"{self.where}: cannot {verb} {what}: forbidden: {err.message} (the ClusterRole "
                f"{READER_ROLE} of draguard's chart grants every read draguard makes: bind it to these "
                "credentials)"
            )
        return f"{self.where}: cannot {verb} {what}: {err}"
