"""The structured allocator: "can these claims get devices on this node, and which ones?"

A port of upstream's ``structured.NewAllocator`` / ``Allocate`` (kube-scheduler 1.36, the
``incubating`` variant, with the ``experimental`` list-attribute semantics behind
``Features.list_type_attributes``): ``staging/src/k8s.io/dynamic-resource-allocation/structured``.

An Allocator is built once for a snapshot of the cluster (classes, slices, what is allocated) and
then asked about many nodes, by many pods (each through its own ``fork``). What depends only on
the snapshot is computed once, on first use, and kept for the Allocator's lifetime:

* per slice and device (``devices``): identity, taints, counters, capacities, selector results and
  verdicts, what a request of given amounts consumes of the device, and result entries that name
  only the request and the device;
* per node (``pools.NodeView``, by node name and labels): the pools and candidate devices, the
  counters each pool has left after the allocated devices, and per request selectors the list of
  devices worth scanning.

None of it is ever invalidated: a snapshot never changes (the webhook builds a new Snapshot, and
with it a new Allocator, when the cluster does), verdicts only become known, and each value is a
function of the snapshot alone (the docstrings where each is kept say why). Per call (``Search``):
the claims' requests, what the search picks and reserves, the explanation. Per fork: upstream's
pool-name counter cache (quirk 4.16a) and the search budget.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from policies.allocator.budget import SearchBudget
from policies.allocator.capacity import nanos
from policies.allocator.devices import Catalog, SliceInfo
from policies.allocator.errors import AllocationError, FailedOnNodeError, SearchAbortedError
from policies.allocator.explain import Explanation
from policies.allocator.features import Features
from policies.allocator.pools import GatherError, NodeView, gather
from policies.allocator.results import build_result
from policies.allocator.search import Search, SearchContext
from policies.allocator.selectors import SelectorEngine
from policies.allocator.state import AllocatedState, DeviceID, collect
from policies.api.core import Node
from policies.api.quantity import Quantity
from policies.api.resource import AllocationResult, DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice
from policies.cel import SelectorCache


@dataclass(frozen=True)
class AllocationOutcome:
    """The answer for one node.

    ``results`` has one entry per claim (same order) when everything fits, else ``None``;
    ``error`` is a fatal input problem (``FailedOnNodeError`` only rejects this node);
    ``invocations`` counts search steps (upstream's allocateOne calls); ``explanation`` says why
    the claims do not fit when they don't.
    """

    results: list[AllocationResult] | None
    error: AllocationError | None
    invocations: int
    explanation: Explanation | None


def random_share_id() -> str:
    """A random RFC 4122 version-4 UUID in its usual text form, as ``str(uuid.uuid4())`` makes one,
    without building a ``uuid.UUID`` object: every share picked during a search gets one.

    The version digit is written as ``4``, and the variant digit (the two top bits ``10``) is looked
    up from the random one, which keeps its two low bits uniform."""
    text = os.urandom(16).hex()
    return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-{_VARIANT[text[16]]}{text[17:20]}-{text[20:]}"


# A hex digit -> the RFC 4122 variant digit with the same two low bits.
_VARIANT = {f"{n:x}": f"{n & 3 | 8:x}" for n in range(16)}


class Allocator:
    """Allocates claims on nodes; build once per cluster snapshot, call ``allocate`` per node."""

    def __init__(
        self,
        features: Features,
        allocated: AllocatedState,
        classes: Mapping[str, DeviceClass],
        slices: Sequence[ResourceSlice],
        *,
        taint_rules: Sequence[DeviceTaintRule] = (),
        cel_cache: SelectorCache | None = None,
        budget: SearchBudget | None = None,
        new_share_id: Callable[[], str] = random_share_id,
    ) -> None:
        self._features = features
        catalog = self._catalog = Catalog(taint_rules)
        infos = [SliceInfo(s, catalog.make_devices) for s in slices]
        # Upstream 1.36 NewAllocator: node-local slices by node name, everything else shared
        # (slices with shared counters are always shared in 1.36).
        self._on_node: dict[str, list[SliceInfo]] = {}
        self._shared: list[SliceInfo] = []
        self._by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
        for info in infos:
            if info.node_name and not info.has_counters:
                self._on_node.setdefault(info.node_name, []).append(info)
            else:
                self._shared.append(info)
            self._by_pool.setdefault((info.driver, info.pool_name), []).append(info)

        allocated_keys = {_key(d) for d in allocated.allocated_devices}
        shared_keys = {_key(d) for d, _ in allocated.allocated_shared_device_ids}
        capacity_keys = {_key(d): amounts for d, amounts in allocated.aggregated_capacity.items()}
        self._context = SearchContext(
            features=features,
            classes=classes,
            engine=SelectorEngine(features.list_type_attributes, cel_cache),
            allocated_uids=frozenset(catalog.uid_of(k) for k in allocated_keys),
            allocated_keys=frozenset(allocated_keys | shared_keys | set(capacity_keys)),
            aggregated={
                catalog.uid_of(k): {name: nanos(q) for name, q in amounts.items()}
                for k, amounts in capacity_keys.items()
            },
            available_counters={},
            new_share_id=new_share_id,
            budget=budget or SearchBudget(),
        )
        self._views: dict[ViewKey, NodeView | GatherError] = {}
        # The views with candidate devices in each pool: those a placement there makes stale (add).
        self._pool_views: dict[tuple[str, str], set[ViewKey]] = {}
        self._growth: _Growth | None = None

    def allocate(
        self,
        node: Node | None,
        claims: Sequence[ResourceClaim],
        *,
        explain: bool = True,
        quick_reject: bool = False,
        build_results: bool = True,
    ) -> AllocationOutcome:
        """Try to allocate all ``claims`` on ``node`` (``None``: only devices usable everywhere).

        ``explain=False`` skips building the explanation of a failure (for bulk dry runs).
        ``quick_reject=True`` skips the search when some request cannot find enough usable devices
        on the node at all: same answer as upstream, but without its exhaustive (exponential) search
        of every combination, so ``invocations`` is 0 then instead of upstream's count.
        ``build_results=False`` answers "fits" with ``results == []`` without assembling the
        AllocationResults (a whole-cluster question that lists only a few nodes' devices).
        """
        node_name = node.name if node is not None else None
        view = self._view(node_name, node.labels if node is not None else {})
        if isinstance(view, GatherError):
            return AllocationOutcome(None, AllocationError(f"gather pool information: {view}"), 0, None)
        search = Search(self._context, view, claims)
        try:
            search.prepare()
            if not (quick_reject and search.hopeless()) and search.run():
                if not build_results:
                    return AllocationOutcome([], None, search.invocations, None)
                results = [build_result(data, self._features, node_name or "") for data in search.claims]
                return AllocationOutcome(results, None, search.invocations, None)
        except SearchAbortedError as err:
            return AllocationOutcome(None, err, search.invocations, search.explain() if explain else None)
        except AllocationError as err:
            return AllocationOutcome(None, err, search.invocations, None)
        explanation = search.explain() if explain else None
        if view.any_invalid:
            # Not fatal: other nodes may still work (upstream ErrFailedAllocationOnNode).
            failed = FailedOnNodeError("invalid resource pools were encountered")
            return AllocationOutcome(None, failed, search.invocations, explanation)
        return AllocationOutcome(None, None, search.invocations, explanation)

    def fork(self, *, budget: SearchBudget | None = None) -> Allocator:
        """An Allocator for the same inputs that answers like a freshly built one, without rebuilding.

        Shared: what depends only on the snapshot (see the module docstring). Fresh: the pool-name
        counter cache, which upstream keeps for one allocator's lifetime and which therefore must
        not carry over from another pod's questions, and the budget (the parent's when not given).
        Not for use by several threads at once.
        """
        forked = copy.copy(self)
        forked._context = dataclasses.replace(
            self._context, available_counters={}, budget=budget or self._context.budget
        )
        return forked

    def growing(self) -> Allocator:
        """A copy for placing pods one after another (:meth:`add`), as consecutive scheduling
        cycles see the cluster: what is allocated is its own and grows in place, and the views of
        the nodes a placement does not touch, with what they computed, carry over. Building an
        allocator per placement cost a headroom of 20,000 GPUs most of its time. Forks of it see
        its later placements; the allocator it was made from does not."""
        grown = copy.copy(self)
        context = self._context
        growth = _Growth(
            set(context.allocated_uids),
            set(context.allocated_keys),
            {uid: dict(amounts) for uid, amounts in context.aggregated.items()},
        )
        grown._growth = growth
        grown._context = dataclasses.replace(
            context,
            allocated_uids=growth.uids,
            allocated_keys=growth.keys,
            aggregated=growth.aggregated,
            available_counters={},
        )
        grown._views = dict(self._views)
        grown._pool_views = {pool: set(keys) for pool, keys in self._pool_views.items()}
        return grown

    def add(self, results: Iterable[AllocationResult]) -> None:
        """What a placement allocated, in use from now on as the scheduler's walk over allocated
        claims would find it (:func:`collect`); the views of every node with candidate devices in
        the pools it touched forget their counters left and scan lists, which depend on what is in
        use (their pools and devices do not: gathering them again cost a headroom a tenth of its
        time); a view still shared with the allocator this one grew from is copied first. Other
        nodes' views keep everything. Only on a :meth:`growing` copy."""
        growth = self._growth
        if growth is None:
            raise TypeError("add() changes what is allocated: only a growing() allocator may")
        exclusive: set[DeviceID] = set()
        shared: set[tuple[DeviceID, str]] = set()
        capacity: dict[DeviceID, dict[str, Quantity]] = {}
        for result in results:
            collect(
                result.devices.results or () if result.devices else (),
                self._features,
                exclusive,
                shared,
                capacity,
            )
        touched = {(d.driver, d.pool) for d in (*exclusive, *(d for d, _ in shared), *capacity)}
        for device in exclusive:
            growth.uids.add(self._catalog.uid_of(_key(device)))
        growth.keys.update(_key(d) for d in (*exclusive, *(d for d, _ in shared), *capacity))
        for device, amounts in capacity.items():
            total = growth.aggregated.setdefault(self._catalog.uid_of(_key(device)), {})
            for name, amount in amounts.items():
                total[name] = total.get(name, 0) + nanos(amount)
        for pool in touched:
            for key in self._pool_views.get(pool, ()):
                view = self._views.get(key)
                if isinstance(view, NodeView):
                    self._views[key] = view.in_use_changed(key in growth.own_views)
                    growth.own_views.add(key)

    def _view(self, node_name: str | None, labels: Mapping[str, str]) -> NodeView | GatherError:
        """The node's pools, gathered once per node name and labels."""
        cache_key = (node_name, frozenset(labels.items()))
        view = self._views.get(cache_key)
        if view is None:
            candidates = [*self._on_node.get(node_name, []), *self._shared] if node_name else self._shared
            try:
                view = gather(node_name, labels, candidates, self._by_pool, self._features)
            except GatherError as err:
                view = err
            else:
                for pool in view.pools:
                    if pool.slices:
                        self._pool_views.setdefault((pool.driver, pool.name), set()).add(cache_key)
            self._views[cache_key] = view
            if self._growth is not None:
                self._growth.own_views.add(cache_key)
        return view


ViewKey = tuple[str | None, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class _Growth:
    """A growing allocator's own allocated state, the very sets its search context reads."""

    uids: set[int]
    keys: set[tuple[str, str, str]]
    aggregated: dict[int, dict[str, int]]
    # The views that are this allocator's own, not the parent's: changed in place (see add).
    own_views: set[ViewKey] = dataclasses.field(default_factory=set)


def _key(device: DeviceID) -> tuple[str, str, str]:
    return (device.driver, device.pool, device.device)
