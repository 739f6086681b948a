"""A pod already in the cluster, as compact as what the decisions read of it.

A cluster at Kubernetes' limit holds 100,000 pods; decoded whole, each is some 18 KB of models,
and nearly all of it (env, volumes, probes, conditions) is read by nothing. kube-scheduler keeps a
``PodInfo`` per pod (upstream ``pkg/scheduler/framework/types.go``: the pod with its affinity terms
parsed once) in a ``NodeInfo`` that sums its pods' requests; draguard keeps the same, smaller:

* :class:`PodInfo` holds what is the pod's own (name, uid, node, phase, start, claim names) and
  what the filters, preemption and the rules read, computed once: requests as NodeResourcesFit
  counts them, the scoring's non-zero requests, host ports, labels and affinity;
* ``shape`` is the rest of the pod, a Pod model holding the spec less the node, that the pods of
  one template share (the quota rule prices a claim with it, the sharing rule reads which
  containers use a claim). :class:`Shapes` hands out one per distinct spec, and one labels dict
  per distinct set of labels (a StatefulSet's pods differ in their labels only);
* :class:`NodePods` is a node's bound pods with their sums, updated pod by pod (upstream
  ``NodeInfo.AddPod``/``RemovePod``), so that a pod event costs its node, not the cluster.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.api.core import Affinity, Pod, PodAffinityTerm, PodStatus
from policies.api.kinds import DEFAULT_NAMESPACE, decode_as
from policies.scheduler import resources
from policies.scheduler.affinityterms import PodTerms
from policies.scheduler.ports import HostPorts, host_ports
from policies.scheduler.resources import Resource

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
PREEMPTED_BY_SCHEDULER = "PreemptionByScheduler"

Key = tuple[str, str]
"""``(namespace, name)``, a namespace left empty in a manifest counting as ``default``."""


def pod_key(pod: Pod) -> Key:
    return (pod.namespace or DEFAULT_NAMESPACE, pod.name)


def is_bound(pod: Pod) -> bool:
    """Load on a node: bound (``spec.nodeName``) and not finished."""
    phase = pod.status.phase if pod.status is not None else None
    return bool(pod.spec.node_name) and phase not in TERMINAL_PHASES


def is_pending(pod: Pod) -> bool:
    """A question for the scheduler: no node yet, not finished, not being deleted."""
    phase = pod.status.phase if pod.status is not None else None
    return not pod.spec.node_name and phase not in TERMINAL_PHASES and not pod.metadata.deletion_timestamp


def _preempted(status: PodStatus | None) -> bool:
    """upstream podTerminatingByPreemption's condition: DisruptionTarget set by the scheduler."""
    for condition in (status.conditions or ()) if status is not None else ():
        if condition.type == "DisruptionTarget":
            return condition.status == "True" and condition.reason == PREEMPTED_BY_SCHEDULER
    return False


def _interned(text: str | None) -> str | None:
    return sys.intern(text) if text is not None else None


def claim_names(pod: Pod, spec: Pod | None = None) -> tuple[tuple[str, str], ...]:
    """``(pod claim name, ResourceClaim name)`` for each of the pod's claims whose object is known:
    named directly, or generated from a template and recorded in ``status.resourceClaimStatuses``.
    ``spec`` is the model holding the pod's spec when ``pod`` holds only its own part (a record's
    shape holds ``spec.resourceClaims``, the pod's own part its status)."""
    statuses = (pod.status.resource_claim_statuses or []) if pod.status is not None else []
    generated = {s.name: s.resource_claim_name for s in statuses}
    found = []
    for ref in (spec or pod).spec.resource_claims or ():
        name = ref.resource_claim_name or generated.get(ref.name)
        if name:
            found.append((sys.intern(ref.name), name))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What decisions read of a pod of the cluster (see the module docstring)."""

    namespace: str
    name: str
    uid: str
    node_name: str
    phase: str
    priority: int
    start_time: str | None
    deleting: bool
    preempted: bool
    nominated_node: str | None
    labels: Mapping[str, str]
    affinity: Affinity | None
    terms: PodTerms | None
    requests: Resource
    non_zero_requests: Resource
    host_ports: HostPorts
    claims: tuple[tuple[str, str], ...]
    shape: Pod
    version: str = ""

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        """The record of a pod model; its shape is the pod itself (files, questions, a placement)."""
        requests, non_zero = resources.requests(pod), resources.non_zero_requests(pod)
        labels = pod.metadata.labels or {}
        terms = PodTerms.of(pod.namespace, labels, pod.spec.affinity)
        return cls._of(pod, pod, labels, terms, requests, non_zero, host_ports(pod))

    @classmethod
    def _of(
        cls,
        pod: Pod,
        shape: Pod,
        labels: Mapping[str, str],
        terms: PodTerms | None,
        requests: Resource,
        non_zero: Resource,
        ports: HostPorts,
    ) -> PodInfo:
        status = pod.status
        # The names a cluster repeats on every pod are interned: one string per namespace, node and
        # phase instead of one per pod (some 170 bytes a pod).
        return cls(
            namespace=sys.intern(pod.namespace),
            name=pod.name,
            uid=pod.metadata.uid or "",
            node_name=sys.intern(pod.spec.node_name or ""),
            phase=sys.intern((status.phase if status is not None else None) or ""),
            priority=shape.spec.priority or 0,
            start_time=_interned(status.start_time) if status is not None else None,
            deleting=bool(pod.metadata.deletion_timestamp),
            preempted=_preempted(status),
            nominated_node=_interned(status.nominated_node_name) if status is not None else None,
            labels=labels,
            affinity=shape.spec.affinity,
            terms=terms,
            requests=requests,
            non_zero_requests=non_zero,
            host_ports=ports,
            claims=claim_names(pod, shape),
            shape=shape,
            version=pod.metadata.resource_version or "",
        )

    @property
    def key(self) -> str:
        """``namespace/name``, as a pod model's ``key``."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def bound(self) -> bool:
        """Load on its node: bound and not finished (:func:`is_bound`)."""
        return bool(self.node_name) and self.phase not in TERMINAL_PHASES

    @property
    def pending(self) -> bool:
        """A question for the scheduler (:func:`is_pending`): no node yet, not finished, not deleted."""
        return not self.node_name and self.phase not in TERMINAL_PHASES and not self.deleting

    @property
    def has_required_anti_affinity(self) -> bool:
        return self.terms is not None and bool(self.terms.required_anti_affinity)

    @property
    def has_pod_affinity(self) -> bool:
        """upstream podWithAffinity: a pod affinity or anti-affinity section (NodeInfo.PodsWithAffinity)."""
        return self.terms is not None

    def claim_name(self, pod_claim: str) -> str | None:
        """The ResourceClaim behind one of the pod's claim names, when known."""
        return next((claim for name, claim in self.claims if name == pod_claim), None)


# --- pods from the API server's JSON ---------------------------------------------------------------

# What of a stored pod is its own (the rest is its shape). Conditions and container statuses are
# here for preemption's DisruptionTarget and the requests of an in-place resize, and only those
# that say something about either are kept (:func:`_own`).
_STATUS_OF_CONTAINER = ("name", "resources", "allocatedResources")
_READ_CONDITIONS = frozenset({"DisruptionTarget", "PodResizePending"})
_OWN: Mapping[str, Any] = {
    "metadata": ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp", "labels"),
    "spec": ("nodeName",),
    "status": {
        "phase": None, "startTime": None, "nominatedNodeName": None, "resourceClaimStatuses": None,
        "conditions": ("type", "status", "reason"),
        "containerStatuses": _STATUS_OF_CONTAINER, "initContainerStatuses": _STATUS_OF_CONTAINER,
    },
}  # fmt: skip
# A stored pod's spec as the scheduler's filters, preemption and the rules read it of a bound pod;
# scheduling fields that only matter for a pod still to place (node selector, tolerations, spread
# constraints, gates) and everything the kubelet reads are left out, so that more pods share one.
_CONTAINER = ("name", "ports", "resources", "restartPolicy")
_SHAPE: Mapping[str, Any] = {
    "spec": {
        "affinity": None, "hostNetwork": None, "priority": None, "resources": None, "overhead": None,
        "resourceClaims": None, "containers": _CONTAINER, "initContainers": _CONTAINER,
    },
}  # fmt: skip


def _project(raw: Any, fields: Any) -> Any:
    """``raw`` with only the keys ``fields`` names: a tuple of keys, or a mapping of keys to what
    to keep below them (None: all of it); a list keeps each of its items so. Values of the wrong
    JSON type are kept as they are, for the model to refuse."""
    if fields is None:
        return raw
    if isinstance(raw, list):
        return [_project(item, fields) for item in raw]
    if not isinstance(raw, dict):
        return raw
    if isinstance(fields, tuple):
        return {k: raw[k] for k in fields if k in raw}
    return {k: _project(raw[k], sub) for k, sub in fields.items() if k in raw}


def _telling(key: str, item: Any) -> bool:
    """Whether a status list's item says something the record reads (see :data:`_OWN`)."""
    if not isinstance(item, dict):
        return True  # for the model to refuse
    if key == "conditions":
        return item.get("type") in _READ_CONDITIONS
    return "resources" in item or "allocatedResources" in item


def _own(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A stored pod's own part, as the Pod model decodes it."""
    own: dict[str, Any] = _project(raw, _OWN)
    status = own.get("status")
    if isinstance(status, dict):
        for key in ("conditions", "containerStatuses", "initContainerStatuses"):
            items = status.get(key)
            if isinstance(items, list):
                status[key] = [item for item in items if _telling(key, item)] or None
                if status[key] is None:
                    del status[key]
    return {**own, "apiVersion": "v1", "kind": "Pod"}


def _reads_labels(affinity: Affinity) -> bool:
    """Whether a term takes values from the pod's own labels (matchLabelKeys, mismatchLabelKeys)."""
    terms: list[PodAffinityTerm] = []
    for section in (affinity.pod_affinity, affinity.pod_anti_affinity):
        if section is not None:
            terms += section.required_during_scheduling_ignored_during_execution or ()
            preferred = section.preferred_during_scheduling_ignored_during_execution or ()
            terms += (weighted.pod_affinity_term for weighted in preferred)
    return any(t.match_label_keys or t.mismatch_label_keys for t in terms)


@dataclass
class Shapes:
    """One Pod model per distinct pod spec, with what the scheduler computes from it, and one dict
    per distinct set of labels, so that the pods of a template share them; what was seen is kept
    as long as this object lives (one per cluster state; a cluster has a few thousand templates).
    ``misses`` counts the specs decoded."""

    _found: dict[str, tuple[Pod, Resource, Resource, HostPorts]] = field(default_factory=dict)
    _labels: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = field(default_factory=dict)
    _terms: dict[tuple[str, int, int], PodTerms | None] = field(default_factory=dict)
    _resources: dict[tuple[object, ...], Resource] = field(default_factory=dict)
    misses: int = 0

    def __len__(self) -> int:
        return len(self._found)

    def record(self, raw: Mapping[str, Any], decode: Callable[[Mapping[str, Any]], Pod]) -> PodInfo:
        """The record of a pod given as the API server's JSON. ``decode`` turns a JSON object into a
        defaulted Pod, for the shape, decoded only the first time it is seen; the pod's own part
        is decoded as it is (raises :class:`DecodeError` on what is not a pod)."""
        own = decode_as(Pod, _own(raw))
        shape_raw = _project(raw, _SHAPE)
        text = json.dumps(shape_raw, separators=(",", ":"))
        found = self._found.get(text)
        if found is None:
            shape = decode({**shape_raw, "apiVersion": "v1", "kind": "Pod"})
            requests, non_zero = resources.requests(shape), resources.non_zero_requests(shape)
            found = (shape, self._shared(requests), self._shared(non_zero), host_ports(shape))
            self._found[text] = found
            self.misses += 1
        shape, requests, non_zero, ports = found
        status = own.status
        if status is not None and (status.container_statuses or status.init_container_statuses):
            resized = Pod(spec=shape.spec, status=status)  # the scheduler counts an in-place resize
            if resources.as_resized(resized) is not resized:
                requests = self._shared(resources.requests(resized))
                non_zero = self._shared(resources.non_zero_requests(resized))
        given: Mapping[str, str] = own.metadata.labels or {}
        labels = self._labels.setdefault(tuple(given.items()), given)
        terms = None
        if shape.spec.affinity is not None:
            # The shape and the labels are the ones this object keeps, so their ids are stable;
            # the labels count only for terms that take label values from the pod.
            key = (own.namespace, id(shape), id(labels) if _reads_labels(shape.spec.affinity) else 0)
            if key not in self._terms:
                self._terms[key] = PodTerms.of(own.namespace, labels, shape.spec.affinity)
            terms = self._terms[key]
        return PodInfo._of(own, shape, labels, terms, requests, non_zero, ports)

    def _shared(self, value: Resource) -> Resource:
        key = (value.milli_cpu, value.memory, value.ephemeral_storage, value.allowed_pods,
               *sorted(value.scalars.items()))  # fmt: skip
        return self._resources.setdefault(key, value)


# --- a node's pods -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelGroup:
    """A node's pods of one namespace that share one labels mapping (a template's pods share it,
    :class:`Shapes`): how many, and how many of them are not being deleted."""

    labels: Mapping[str, str]
    pods: int
    live: int


@dataclass(frozen=True, slots=True)
class TermsGroup:
    """A node's pods with pod affinity that share one :class:`PodTerms` (pods of one template in
    one namespace share it, :class:`Shapes`), and how many they are."""

    terms: PodTerms
    pods: int


@dataclass(frozen=True, slots=True)
class NodePods:
    """A node's bound pods and their sums (upstream NodeInfo's Pods, Requested, NonZeroRequested,
    UsedPorts), updated pod by pod.

    PodTopologySpread and InterPodAffinity read every bound pod of the cluster for each pod they
    judge (100,000 at Kubernetes' limit, a tenth of a dry run); they read them grouped instead
    (:attr:`by_namespace`, :attr:`terms_groups`), worked out on first use for this node's pods.
    A changed node is a new object, so a group never outlives the pods it counts, and a pod event
    costs its own node's groups, never the cluster's."""

    pods: tuple[PodInfo, ...] = ()
    requested: Resource = field(default_factory=Resource)
    non_zero_requested: Resource = field(default_factory=Resource)
    used_ports: HostPorts = frozenset()
    _by_namespace: Mapping[str, tuple[LabelGroup, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _terms_groups: tuple[TermsGroup, ...] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def by_namespace(self) -> Mapping[str, tuple[LabelGroup, ...]]:
        """The pods by namespace, those with the same labels object counted together."""
        if self._by_namespace is None:
            counts: dict[str, dict[int, list[Any]]] = {}
            for pod in self.pods:
                group = counts.setdefault(pod.namespace, {}).setdefault(id(pod.labels), [pod.labels, 0, 0])
                group[1] += 1
                group[2] += not pod.deleting
            grouped = {ns: tuple(LabelGroup(*g) for g in of_ns.values()) for ns, of_ns in counts.items()}
            object.__setattr__(self, "_by_namespace", grouped)
        return self._by_namespace  # type: ignore[return-value]

    @property
    def terms_groups(self) -> tuple[TermsGroup, ...]:
        """The pods with pod affinity (upstream NodeInfo.PodsWithAffinity), by their terms."""
        if self._terms_groups is None:
            counts: dict[int, list[Any]] = {}
            for pod in self.pods:
                if pod.terms is not None:
                    counts.setdefault(id(pod.terms), [pod.terms, 0])[1] += 1
            object.__setattr__(self, "_terms_groups", tuple(TermsGroup(*g) for g in counts.values()))
        return self._terms_groups  # type: ignore[return-value]

    def with_pod(self, pod: PodInfo) -> NodePods:
        """upstream NodeInfo.AddPod."""
        return NodePods(
            (*self.pods, pod),
            self.requested.plus(pod.requests),
            self.non_zero_requested.plus(pod.non_zero_requests),
            self.used_ports | pod.host_ports,
        )

    def with_pods(self, pods: Iterable[PodInfo]) -> NodePods:
        found = self
        for pod in pods:
            found = found.with_pod(pod)
        return found

    def without(self, gone: Iterable[PodInfo]) -> NodePods:
        """upstream NodeInfo.RemovePod for each: their requests are freed, and so are their host
        ports, which the node keeps as a set, not a count (a port another pod also holds is freed)."""
        gone = list(gone)
        keys = {(p.namespace, p.name) for p in gone}
        freed = frozenset().union(*(p.host_ports for p in gone))
        kept = NodePods().with_pods(p for p in self.pods if (p.namespace, p.name) not in keys)
        return NodePods(kept.pods, kept.requested, kept.non_zero_requested, self.used_ports - freed)


EMPTY_NODE = NodePods()


def moved(loads: dict[str, NodePods], before: PodInfo | None, after: PodInfo | None) -> None:
    """``loads`` after a pod changed from ``before`` to ``after`` (None: absent), as kube-scheduler's
    cache updates a pod: removed from its node, then added (at the end) to its node."""
    if before is not None and before.bound and before.node_name in loads:
        loads[before.node_name] = loads[before.node_name].without([before])
    if after is not None and after.bound:
        loads[after.node_name] = loads.get(after.node_name, EMPTY_NODE).with_pod(after)
