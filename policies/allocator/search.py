"""One ``allocate`` call: validate the claims' requests, then search depth-first for a solution.

Upstream 1.36: ``Allocate``, ``validateDeviceRequest``, ``allocateOne``, ``isSelectable``,
``allocateDevice`` and ``checkAvailableCounters`` in
``structured/internal/incubating/allocator_incubating.go`` (dra-reference 4.5-4.14). The search
order, the combination-only scan inside a request, the 32-results cut-off with its
MAX_EXCEEDED signal, and the quirks of ``allocateDevice`` are reproduced as upstream has them:

* counters reserved for a device are not released when its taints or a constraint reject it
  (dra-reference 4.7), nor when a multi-allocatable device is deallocated (4.10);
* if the capacity re-check fails after the constraints were updated, nothing is rolled back (4.7);
* available and in-flight counters are keyed by pool *name* only, not (driver, pool) (4.16a);
* an in-flight share of a multi-allocatable device without capacities is never forgotten (so it
  skips the counter check for later shares), as upstream only removes non-empty consumption.

The recursion of ``allocateOne`` is kept as plain recursion (see ``Search.run`` for its depth).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass

from policies.allocator.budget import SearchBudget
from policies.allocator.capacity import Amount, Consumption, request_key
from policies.allocator.constraints import DistinctAttribute, MatchAttribute, Tracker
from policies.allocator.counters import PoolCounters, Reserved, covers, left_in, release, reserve
from policies.allocator.devices import CounterSlots, DeviceInfo, SelectorKey
from policies.allocator.errors import AllocationError, SearchAbortedError
from policies.allocator.explain import (
    REASON_TEXT,
    ConstraintRejection,
    Explanation,
    PoolProblem,
    Reason,
    RequestExplanation,
    SelectorRejection,
)
from policies.allocator.features import Features
from policies.allocator.nodes import NodeSelectorError
from policies.allocator.pools import CHECK, PASS, PASS_UNLESS_SHARED, NodeView, Pool, ScanList
from policies.allocator.selectors import SelectorEngine
from policies.allocator.taints import blocks_allocation
from policies.api.quantity import Quantity
from policies.api.resource import (
    ALL,
    EXACT_COUNT,
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
)
from policies.cel import CompileError, EvalError

# allocateOne outcomes; errors are exceptions.
FAIL = 0
SUCCESS = 1
MAX_EXCEEDED = 2

# resourceapi.AllocationResultsMaxSize: at most this many devices per claim.
RESULTS_MAX = 32

# Frames a caller of the allocator may use below the search (see Search.run).
_CALLER_FRAMES = 500

_USABLE = int(Reason.USABLE)
_IN_USE = int(Reason.IN_USE)
_CAPACITY = int(Reason.CAPACITY)
_COUNTERS = int(Reason.COUNTERS)


@dataclass
class SearchContext:
    """What every search of one Allocator shares: inputs digested once, caches, switches."""

    features: Features
    classes: Mapping[str, DeviceClass]
    engine: SelectorEngine
    allocated_uids: Set[int]
    # Devices allocated in any way (exclusive, shared, with consumed capacity): they consume counters.
    allocated_keys: Set[tuple[str, str, str]]
    aggregated: Mapping[int, Mapping[str, int]]
    available_counters: dict[str, PoolCounters]
    new_share_id: Callable[[], str]
    budget: SearchBudget

    def counters_available(self, pool: Pool) -> PoolCounters:
        """Counters left in the pool after allocated devices, cached by pool *name* (upstream quirk).

        Only the search calls this: the first pool of a name whose counters it checks decides the
        cached entry for the Allocator's lifetime, as upstream's availableCounters does.
        """
        available = self.available_counters.get(pool.name)
        if available is None:
            available = self.available_counters[pool.name] = left_in(pool, self.allocated_keys)
        return available

    def peek_counters(self, pool: Pool, name_shared: bool) -> PoolCounters | None:
        """What the search would check the pool's devices against, without caching anything.

        Side checks (explanations, quick rejection) must not fill the cache from devices the search
        never reached. ``None`` when it cannot be known: nothing cached yet and several pools on the
        node share the name, so which one the search fills the entry from depends on the search.
        """
        available = self.available_counters.get(pool.name)
        if available is not None:
            return available
        return None if name_shared else left_in(pool, self.allocated_keys)


class RequestData:
    """A request, or one alternative of a ``firstAvailable`` request, ready for the search."""

    __slots__ = (
        "admin",
        "all_devices",
        "all_mode",
        "base_name",
        "capacity_key",
        "capacity_requests",
        "claim_key",
        "class_name",
        "class_selectors",
        "device_class",
        "full_name",
        "last_open",
        "mode",
        "name",
        "num_devices",
        "parent",
        "raw_tolerations",
        "reached",
        "scan_list",
        "selector_key",
        "selectors",
        "tolerations",
        "trackers",
        "why",
    )

    def __init__(
        self,
        claim_key: str,
        request: ExactDeviceRequest | DeviceSubRequest,
        name: str,
        parent: str | None,
    ) -> None:
        self.claim_key = claim_key
        self.name = name
        self.parent = parent
        self.base_name = parent if parent is not None else name
        self.full_name = f"{parent}/{name}" if parent is not None else name
        self.admin = bool(getattr(request, "admin_access", None))
        self.raw_tolerations = request.tolerations
        self.tolerations: list[DeviceToleration] = request.tolerations or []
        self.selectors: list[DeviceSelector] = request.selectors or []
        self.mode = request.allocation_mode or ""
        self.all_mode = self.mode == ALL
        self.num_devices = 0
        self.class_name = request.device_class_name
        self.device_class: DeviceClass | None = None
        self.class_selectors: list[DeviceSelector] = []
        requests = request.capacity.requests if request.capacity is not None else None
        self.capacity_requests = {k: Amount.of(v) for k, v in requests.items()} if requests else None
        self.capacity_key = request_key(self.capacity_requests)
        self.all_devices: list[DeviceInfo] = []
        self.trackers: tuple[Tracker, ...] = ()
        # Key of the selector verdicts cached on devices: same class and selectors, same answer.
        expressions = tuple(s.cel.expression if s.cel else None for s in self.selectors)
        self.selector_key: SelectorKey = (self.class_name, expressions)
        self.reached = False
        # The view's scan list for the request (see Search._scan_list).
        self.scan_list: ScanList | None = None
        # Per device index: the furthest reason the search recorded (for explanations).
        self.why: dict[int, int] = {}
        # The last scan position whose device may still get a note below Reason.COUNTERS (notes
        # only rise, so it only moves down: see Search._rest_noted).
        self.last_open = 0


class ClaimData:
    """A claim being allocated: its requests, constraint trackers and the devices picked so far."""

    __slots__ = ("claim", "key", "picks", "requests", "selected")

    def __init__(self, claim: ResourceClaim) -> None:
        self.claim = claim
        self.key = claim.key
        # One list per request: the request itself, or its firstAvailable alternatives.
        self.requests: list[list[RequestData]] = []
        self.picks: list[Pick] = []
        self.selected: list[int] = []


class Pick:
    """One device picked for one request, with what it takes from shared state."""

    __slots__ = ("consumption", "device", "multi", "request", "share_id")

    def __init__(self, request: RequestData, device: DeviceInfo, multi: bool) -> None:
        self.request = request
        self.device = device
        self.multi = multi
        self.share_id: str | None = None
        # What a share of a multi-allocatable device takes from it (None for other picks).
        self.consumption: Consumption | None = None

    @property
    def consumed(self) -> dict[str, Quantity] | None:
        """The result's ``consumedCapacity``: built only for the picks a result reports (the
        search undoes many), as the request spelled the amounts; None for a device without
        capacities."""
        if self.consumption is None:
            return None
        return self.consumption.consumed_capacity(self.request.capacity_requests) or None


class Search:
    """State of one allocation attempt on one node."""

    def __init__(self, ctx: SearchContext, view: NodeView, claims: Sequence[ResourceClaim]) -> None:
        self.ctx = ctx
        self.features = ctx.features
        self.view = view
        self.claims = [ClaimData(claim) for claim in claims]
        self.invocations = 0
        self.result_limit_hit = False
        # Device uid -> indices of the claims it is being allocated for (never an empty set).
        self.picked: dict[int, set[int]] = {}
        # Device uid -> capacity being consumed by shares picked in this search.
        self.in_flight: dict[int, dict[str, int]] = {}
        # What devices picked in this search consume, per counter (pool name, set, counter).
        self.reserved: Reserved = {}
        self.placed = 0
        self.most_placed = 0
        self._next_budget_check = 1

    # --- step 3: validate requests -----------------------------------------------------------------

    def prepare(self) -> None:
        """Turn every request into RequestData; raises AllocationError with upstream's wording."""
        for data in self.claims:
            minimum = 0
            for request in data.claim.spec.devices.requests or []:
                alternatives = self._alternatives(data, request)
                data.requests.append(alternatives)
                data.selected.append(0)
                minimum += min(rd.num_devices for rd in alternatives)
            if minimum > RESULTS_MAX:
                raise AllocationError(
                    f"claim {data.key}: number of requested devices {minimum} exceeds the claim limit "
                    f"of {RESULTS_MAX}"
                )
            self._add_trackers(data)

    def _alternatives(self, data: ClaimData, request: DeviceRequest) -> list[RequestData]:
        subs = request.first_available or []
        if subs and not self.features.prioritized_list:
            raise AllocationError(
                f"claim {data.key}, request {request.name}: has subrequests, but the DRAPrioritizedList "
                "feature is disabled"
            )
        if not self.features.consumable_capacity:
            if request.exactly is not None and request.exactly.capacity is not None:
                raise AllocationError(
                    f"claim {data.key}, request {request.name}: has capacity requests, but the "
                    "DRAConsumableCapacity feature is disabled"
                )
            for sub in subs:
                if sub.capacity is not None:
                    raise AllocationError(
                        f"claim {data.key}, subrequest {sub.name}: has capacity requests, but the "
                        "DRAConsumableCapacity feature is disabled"
                    )
        if subs:
            return [self._request_data(data, sub, sub.name, request.name) for sub in subs]
        if request.exactly is None:
            raise AllocationError(
                f"claim {data.key}, request {request.name}: neither exactly nor firstAvailable is set "
                "(unsupported request type?)"
            )
        return [self._request_data(data, request.exactly, request.name, None)]

    def _request_data(
        self,
        data: ClaimData,
        request: ExactDeviceRequest | DeviceSubRequest,
        name: str,
        parent: str | None,
    ) -> RequestData:
        rd = RequestData(data.key, request, name, parent)
        where = f"claim {data.key}, request {name}"
        for i, selector in enumerate(rd.selectors):
            if selector.cel is None:
                raise AllocationError(
                    f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if not self.features.admin_access and getattr(request, "admin_access", None) is not None:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        if not rd.class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.ctx.classes.get(rd.class_name)
        if device_class is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {rd.class_name}: deviceclass.resource.k8s.io "
                f'"{rd.class_name}" not found'
            )
        rd.device_class = device_class
        rd.class_selectors = device_class.spec.selectors or []
        if rd.mode == EXACT_COUNT:
            rd.num_devices = request.count or 0
        elif rd.all_mode:
            rd.all_devices = self._all_devices(rd, where)
            rd.num_devices = len(rd.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {rd.mode}")
        return rd

    def _all_devices(self, rd: RequestData, where: str) -> list[DeviceInfo]:
        """Every selectable device with room for the request; any unusable pool is an error."""
        found = []
        for pool in self.view.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool} is currently invalid"
                )
            for info in pool.slices:
                found += [device for device in info.devices if self._own_checks_pass(rd, device)]
        return found

    def _add_trackers(self, data: ClaimData) -> None:
        list_mode = self.features.list_type_attributes
        for i, constraint in enumerate(data.claim.spec.devices.constraints or []):
            tracker: Tracker
            if constraint.match_attribute is not None:
                tracker = MatchAttribute(i, constraint.match_attribute, list_mode)
            elif constraint.distinct_attribute is not None:
                tracker = DistinctAttribute(i, constraint.distinct_attribute, list_mode)
            else:
                raise AllocationError(
                    f"claim {data.key}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
            names = set(constraint.requests or ())
            for alternatives in data.requests:
                for rd in alternatives:
                    if not names or rd.base_name in names or rd.full_name in names:
                        rd.trackers += (tracker,)

    # --- step 4: the search ------------------------------------------------------------------------

    def run(self) -> bool:
        """Search for a solution; True if every claim got its devices.

        ``_allocate_one`` recurses once per device placed (at most RESULTS_MAX per claim) and once
        per firstAvailable request entered, as upstream's allocateOne does. From Python 3.11 on,
        such pure-Python recursion does not use the C stack, so when that depth could pass the
        interpreter's recursion limit (dozens of claims), the limit is raised to fit; never
        lowered, since other threads may be searching too.
        """
        depth = 1 + sum(RESULTS_MAX + len(data.requests) for data in self.claims)
        if depth + _CALLER_FRAMES > sys.getrecursionlimit():
            sys.setrecursionlimit(depth + _CALLER_FRAMES)
        return self._allocate_one(0, 0, 0, 0, False, 0) == SUCCESS

    def _allocate_one(self, c: int, r: int, s: int, d: int, in_sub: bool, start: int) -> int:
        """Upstream allocateOne: place device ``d`` of request ``r`` (alternative ``s``) of claim ``c``.

        ``start`` is the position in the request's scan list (the node's devices in order, minus
        those it is known to refuse on their own: see ``_scan_list``) where the scan begins: after
        the previous device of the same request, so that only combinations are tried.

        Moving on to the next request or claim ends upstream's function with a call whose result it
        returns unchanged; here that is a loop, still counted as one step each time. Past a claim
        boundary, MAX_EXCEEDED from the later claims is reported as FAIL, as upstream does.
        """
        crossed = False  # a claim boundary was passed in this loop
        while True:
            self.invocations += 1
            if self.invocations >= self._next_budget_check:
                self._check_budget()
            if c == len(self.claims):
                return SUCCESS
            data = self.claims[c]
            if r == len(data.requests):
                c, r, s, d, in_sub, start = c + 1, 0, 0, 0, False, 0
                crossed = True
                continue
            alternatives = data.requests[r]
            rd = alternatives[s]
            if rd.parent is not None and not in_sub:
                break
            rd.reached = True
            if rd.all_mode and not rd.all_devices:
                return FAIL
            if d < rd.num_devices:
                break
            r, s, d, in_sub, start = r + 1, 0, 0, False, 0

        if rd.parent is not None and not in_sub:
            all_exceeded = True
            for k in range(len(alternatives)):
                outcome = self._allocate_one(c, r, k, 0, True, 0)
                if outcome == MAX_EXCEEDED:
                    continue
                all_exceeded = False
                if outcome == SUCCESS:
                    data.selected[r] = k
                    return SUCCESS
            if all_exceeded:
                self.result_limit_hit = True
                return FAIL if crossed else MAX_EXCEEDED
            return FAIL

        if len(data.picks) + rd.num_devices - d > RESULTS_MAX:
            self.result_limit_hit = True
            return FAIL if crossed else MAX_EXCEEDED

        if rd.all_mode:
            pick = self._allocate_device(c, rd, rd.all_devices[d])
            if pick is None:
                return FAIL
            outcome = self._allocate_one(c, r, s, d + 1, in_sub, 0)
            if outcome != SUCCESS:
                self._undo(c, pick)
            return FAIL if crossed and outcome == MAX_EXCEEDED else outcome

        candidates, checked, alike_after = rd.scan_list or self._scan_list(rd)
        picked = self.picked
        admin = rd.admin
        why = rd.why
        # Shared devices in use take no counters (see _counters_refusal).
        shared = self.features.consumable_capacity
        # What the last device refused for its counters in this scan consumes (interned, with its
        # pool name): a device consuming the same is refused too. What the search has reserved only
        # grows over the scan (a pick's reservation is released on undo, but reservations leaked by
        # rejections below stay: quirk 4.7), and a check refused at one level of reservations is
        # refused at any higher one (see _counters_refusal).
        refused_slots: CounterSlots | None = None
        for pos in range(start, len(candidates)):
            device = candidates[pos]
            # The checks of upstream's allocateOne loop and allocateDevice, in their order. The
            # scan list holds no allocated device unless the request asks for admin access.
            if (c in picked.get(device.uid, ())) if admin else device.uid in picked:
                if why.get(device.index, 0) < _IN_USE:
                    why[device.index] = _IN_USE
                continue
            known = checked[pos]
            if known != PASS:
                if known == CHECK:
                    if not self._own_checks_pass(rd, device):
                        continue
                elif device.uid in self.in_flight and not self._capacity_fits(rd, device):
                    if why.get(device.index, 0) < _CAPACITY:
                        why[device.index] = _CAPACITY
                    continue
            if device.consumes:
                if device.counter_slots is refused_slots and not (shared and device.multi):
                    if why.get(device.index, 0) < _COUNTERS:
                        why[device.index] = _COUNTERS
                    continue
                refusal = self._counters_refusal(device)
                if refusal:
                    if why.get(device.index, 0) < refusal:
                        why[device.index] = refusal
                    if refusal == _COUNTERS:
                        # The rest of the scan would only refuse the same again, or find devices in
                        # use: when every one of them already has such a note, nothing is left to do.
                        if alike_after[pos] and self._rest_noted(rd, candidates, pos):
                            return FAIL
                        refused_slots = device.counter_slots
                    continue
            pick = self._place(c, rd, device, must=False)
            if pick is None:
                continue
            outcome = self._allocate_one(c, r, s, d + 1, in_sub, pos + 1)
            if outcome == SUCCESS:
                return SUCCESS
            self._undo(c, pick)
            if outcome == MAX_EXCEEDED:
                return FAIL if crossed else MAX_EXCEEDED
        return FAIL

    def _scan_list(self, rd: RequestData) -> ScanList:
        """The devices the request's scan visits, fixed for this search at its first use (scan
        positions index it), each with whether its selector and capacity checks are known to pass.

        Left out are the devices the request's own checks refuse whatever the search picks, as far
        as the selector verdicts known so far tell: the scan passes them over without any effect
        the answer shows, so scanning the list visits the others in the same order with the same
        outcome, and the quick rejection counts the same usable devices (see _scan_state). The
        view keeps the list per what those checks read of the request.
        """
        if rd.scan_list is None:
            key = (rd.selector_key, rd.admin, rd.capacity_key)
            rd.scan_list = self.view.scan_list(key, functools.partial(self._scan_state, rd))
            rd.last_open = len(rd.scan_list.devices) - 1
        return rd.scan_list

    def _rest_noted(self, rd: RequestData, devices: list[DeviceInfo], pos: int) -> bool:
        """Whether every device after ``pos`` in the request's scan list has a note of
        Reason.COUNTERS or further (a note of being in use or out of counters changes nothing)."""
        why = rd.why
        last = rd.last_open
        while last > pos and why.get(devices[last].index, 0) >= _COUNTERS:
            last -= 1
        rd.last_open = last
        return last <= pos

    def _scan_state(self, rd: RequestData, device: DeviceInfo) -> int | None:
        """How the request's scan treats the device, as far as is known without evaluating a
        selector: ``None``, refused on its own without any effect on the answer (left out);
        ``PASS``, its selector and capacity checks pass whatever the search picks (the scan skips
        them); ``PASS_UNLESS_SHARED``, they pass unless shares this search picks on the device
        leave too little capacity (the scan checks only that); ``CHECK``, checked when reached.

        The scan skips a selector refusal silently. An allocated device (unless the request asks
        for admin access) is left out before its selectors are evaluated, as upstream's allocateOne
        skips it before them; it, and a device without the capacity the request needs even when no
        other share is picked (static, it only gets worse), would only get a note that no
        explanation reads: the explanation reports such a device as allocated or short of capacity.
        Devices whose selector verdict is not known yet are checked when reached, as upstream checks
        them (a selector that fails to evaluate fails there), and so are devices selected per
        device, whose node check may fail. Of the capacity check, only the shares picked in this
        search change the answer once the existing ones are counted, and only multi-allocatable
        devices get those (``_place``).
        """
        uid = device.uid
        if not rd.admin and uid in self.ctx.allocated_uids:
            return None
        code = device.verdicts.get(rd.selector_key)
        if code is None:
            return CHECK
        if code != _USABLE:
            return None
        if device.slice.per_device:
            return CHECK
        if not self.features.consumable_capacity:
            return PASS
        if not self._capacity_fits(rd, device, count_in_flight=False):
            return None
        return PASS_UNLESS_SHARED if device.multi else PASS

    def _own_checks_pass(self, rd: RequestData, device: DeviceInfo) -> bool:
        """The request's own selector and capacity checks on the device, in upstream's order (a
        capacity refusal is noted): for every device of an All-mode request, and in a scan for a
        device whose scan state (see _scan_state) does not tell they pass."""
        if self._selectable(rd, device) != _USABLE:
            return False
        if self.features.consumable_capacity and not self._capacity_fits(rd, device):
            _note(rd.why, device.index, _CAPACITY)
            return False
        return True

    def _check_budget(self) -> None:
        budget = self.ctx.budget
        if budget.max_invocations is not None and self.invocations > budget.max_invocations:
            self._abort(f"search effort limit of {budget.max_invocations} steps exceeded", None)
        if budget.deadline is not None and budget.clock is not None and budget.clock() >= budget.deadline:
            self._abort("deadline exceeded", TimeoutError("deadline exceeded"))
        next_check = self.invocations + (budget.clock_interval if budget.deadline is not None else 1 << 62)
        if budget.max_invocations is not None:
            next_check = min(next_check, budget.max_invocations + 1)
        self._next_budget_check = next_check

    def _abort(self, cause: str, wrapped: Exception | None) -> None:
        """Give up like a cancelled scheduler Filter; the deadline is the error's ``__cause__``."""
        wanted = sum(min(rd.num_devices for rd in alts) for data in self.claims for alts in data.requests)
        raise SearchAbortedError(
            f"filter operation aborted: {cause}; the search gave up after {self.invocations} steps, "
            f"having placed at most {self.most_placed} of at least {wanted} device(s) at once"
        ) from wrapped

    # --- checks on one device ----------------------------------------------------------------------

    def _selectable(self, rd: RequestData, device: DeviceInfo) -> int:
        """Upstream isSelectable; Reason.USABLE when the device matches the request.

        The selector verdict depends only on the device, the class and the request's selectors,
        so it is cached on the device for the Allocator's lifetime; the node check of per-device
        node selection depends on the node and is looked up in the node's view.
        """
        code = device.verdicts.get(rd.selector_key)
        if code is None:
            code = self._selector_verdict(rd, device)
            device.remember_verdict(rd.selector_key, code)
            self.view.verdicts_computed += 1
        if code != _USABLE or not device.slice.per_device:
            return code
        return self._node_verdict(device)

    def _selector_verdict(self, rd: RequestData, device: DeviceInfo) -> int:
        if not self.features.device_binding_and_status and device.binding_conditions:
            return Reason.BINDING_CONDITIONS
        where = f"class {rd.class_name}"
        if not self._selectors_match(rd.class_selectors, device, where):
            return Reason.CLASS_SELECTOR
        if not self._selectors_match(rd.selectors, device, f"claim {rd.claim_key}"):
            return Reason.REQUEST_SELECTOR
        return _USABLE

    def _node_verdict(self, device: DeviceInfo) -> int:
        """Per-device node selection: is the device itself reachable from this node?"""
        on_node = self.view.device_on_node.get(device.index, False)
        if isinstance(on_node, NodeSelectorError):
            raise AllocationError(f"failed to parse node selector of device {device}: {on_node}")
        return _USABLE if on_node else Reason.OTHER_NODE

    def _selectors_match(self, selectors: list[DeviceSelector], device: DeviceInfo, where: str) -> bool:
        for i, selector in enumerate(selectors):
            if selector.cel is None:
                raise AllocationError(
                    f"{where}: selector #{i}: CEL expression empty (unsupported selector type?)"
                )
            try:
                if not self.ctx.engine.matches(selector.cel.expression, device):
                    return False
            except CompileError as err:
                raise AllocationError(f"{where}: selector #{i}: CEL compile error: {err}") from None
            except EvalError as err:
                # Upstream's wording: the error alone (EvalError's str adds the device for logs).
                raise AllocationError(f"{where}: selector #{i}: CEL runtime error: {err.message}") from None
        return True

    def _consumption(self, rd: RequestData, device: DeviceInfo) -> Consumption:
        """What the request would take from the device, before counting what is in use."""
        return device.consumption(rd.capacity_key, rd.capacity_requests)

    def _capacity_fits(self, rd: RequestData, device: DeviceInfo, count_in_flight: bool = True) -> bool:
        """Upstream CmpRequestOverCapacity: enough capacity left, within the request policy.

        A request without capacity requests takes every capacity of an unused device whole,
        which always fits when there is no policy to violate: that common case needs no
        arithmetic at all.
        """
        aggregated = self.ctx.aggregated.get(device.uid)
        in_flight = self.in_flight.get(device.uid) if count_in_flight else None
        if aggregated is None and in_flight is None:
            if rd.capacity_requests is None and device.plain_capacity:
                return True
            return device.consumption(rd.capacity_key, rd.capacity_requests).fits_alone
        return device.consumption(rd.capacity_key, rd.capacity_requests).fits(aggregated, in_flight)

    def _allocate_device(self, c: int, rd: RequestData, device: DeviceInfo) -> Pick | None:
        """Upstream allocateDevice for a device of an All-mode request: every check, then the pick.

        The scan of ExactCount requests makes the in-use and counter checks itself and calls
        ``_place`` directly.
        """
        multi = self.features.consumable_capacity and device.multi
        uid = device.uid
        holders = self.picked.get(uid)
        if not multi and rd.admin and holders and c in holders:
            return _reject(rd, device, Reason.IN_USE)
        if not rd.admin and (uid in self.ctx.allocated_uids or holders):
            return _reject(rd, device, Reason.IN_USE)
        refusal = self._counters_refusal(device) if device.consumes else 0
        if refusal:
            return _reject(rd, device, refusal)
        return self._place(c, rd, device, must=True)

    def _place(self, c: int, rd: RequestData, device: DeviceInfo, must: bool) -> Pick | None:
        """The rest of upstream allocateDevice, once the device is not in use and its counters fit.

        Reserves the counters, then checks taints and constraints (a rejection keeps the counters
        reserved: quirk 4.7), marks the device picked, and re-checks capacity after that (a
        rejection keeps the marks: 4.7). ``must`` (All mode): a constraint failure is an error, and
        capacity was not checked yet; the ExactCount scan checks capacity before and calls this
        without ``must``.
        """
        features = self.features
        multi = features.consumable_capacity and device.multi
        uid = device.uid
        if device.consumes and not (multi and self._capacity_in_use(uid)):
            reserve(self.reserved, device.counter_slots)
        if device.taints and features.device_taints and blocks_allocation(device.taints, rd.tolerations):
            return _reject(rd, device, Reason.TAINTED)
        if rd.trackers and not self._add_to_trackers(rd, device, must):
            return None
        if not multi:
            picked = self.picked
            holders = picked.get(uid)
            if holders is None:
                picked[uid] = {c}
            else:
                holders.add(c)
        pick = Pick(rd, device, multi)
        if features.consumable_capacity:
            # The scan checked capacity just before, and nothing since changed what is in use. All
            # mode checked it when listing the devices, before this search picked anything: only
            # the search's own shares of the device can have changed the answer since.
            if must and uid in self.in_flight and not self._capacity_fits(rd, device):
                return _reject(rd, device, Reason.CAPACITY)
            if multi:
                consumption = pick.consumption = self._consumption(rd, device)
                pick.share_id = self.ctx.new_share_id()
                self._add_in_flight(uid, consumption.nanos_by_name)
        self.claims[c].picks.append(pick)
        placed = self.placed = self.placed + 1
        if placed > self.most_placed:
            self.most_placed = placed
        rd.why[device.index] = _USABLE
        return pick

    def _add_to_trackers(self, rd: RequestData, device: DeviceInfo, must: bool) -> bool:
        """Add the device to the request's constraints; on a refusal, take it out of those that
        took it and record why (an error with ``must``)."""
        for i, tracker in enumerate(rd.trackers):
            if tracker.add(device, rd.base_name):
                continue
            if must:
                raise AllocationError(
                    f"claim {rd.claim_key}, request {rd.name}: cannot add device {device} because a claim "
                    "constraint would not be satisfied"
                )
            for earlier in rd.trackers[:i]:
                earlier.remove(rd.base_name)
            _reject(rd, device, Reason.CONSTRAINT + tracker.index)
            return False
        return True

    def _undo(self, c: int, pick: Pick) -> None:
        rd, device = pick.request, pick.device
        for tracker in rd.trackers:
            tracker.remove(rd.base_name)
        picked = self.picked
        holders = picked.get(device.uid)
        if holders:
            holders.discard(c)
            if not holders:
                del picked[device.uid]
        if pick.multi:
            # Not for a device without capacities: upstream only forgets non-empty consumption.
            consumption = pick.consumption
            if consumption is not None and consumption.amounts:
                self._remove_in_flight(device.uid, consumption.nanos_by_name)
        elif self.features.partitionable_devices and device.consumes:
            release(self.reserved, device.counter_slots)
        self.claims[c].picks.pop()
        self.placed -= 1

    def _add_in_flight(self, uid: int, amounts: Mapping[str, int]) -> None:
        current = self.in_flight.get(uid)
        if current is None:
            self.in_flight[uid] = dict(amounts)
            return
        for name, amount in amounts.items():
            current[name] = current.get(name, 0) + amount

    def _remove_in_flight(self, uid: int, amounts: Mapping[str, int]) -> None:
        current = self.in_flight.get(uid)
        if current is None:
            return
        for name, amount in amounts.items():
            if name in current:
                current[name] -= amount
        if not any(current.values()):
            del self.in_flight[uid]

    def _capacity_in_use(self, uid: int) -> bool:
        """Whether shares of the device exist or are being picked: a shared device in use took its
        counters with its first share (upstream skips the counter check for it)."""
        return uid in self.ctx.aggregated or uid in self.in_flight

    def _counters_refusal(self, device: DeviceInfo) -> int:
        """Why allocateDevice refuses a device that consumes counters (a Reason), or 0 if it does not.

        Upstream checkAvailableCounters adds the device's counters to what the search has reserved
        and compares every counter of the pool with what is left after the allocated devices. The
        search reserves only after this check and releases only what it reserved, so before each
        check every counter is within its limit unless the pool started overdrawn: only the
        counters the device consumes can newly exceed theirs, and only they are compared (counters
        the pool does not define are not compared at all).

        The answer depends only on what the device consumes and on what the search has reserved in
        pools of the device's pool name, and a refusal stays a refusal when more is reserved: so the
        scan reuses it for devices consuming the same.
        """
        features = self.features
        if not features.partitionable_devices:
            return Reason.PARTITIONABLE_OFF
        if device.multi and features.consumable_capacity and self._capacity_in_use(device.uid):
            return 0
        left = self.ctx.available_counters.get(device.slice.pool_name)
        if left is None:
            left = self.ctx.counters_available(self.view.pool_of(device))
        if left.overdrawn:
            return _COUNTERS
        limits, reserved = left.limits, self.reserved
        for slot, amount in device.counter_slots:
            limit = limits.get(slot)
            if limit is not None and reserved.get(slot, 0) + amount > limit:
                return _COUNTERS
        return 0

    # --- quick rejection (opt-in) ------------------------------------------------------------------

    def hopeless(self) -> bool:
        """Whether some request can never get enough devices on this node, whatever else is picked.

        A device that fails a check on its own (selectors, already allocated, capacity, counters,
        taints) fails it in every branch of the search, so counting the devices that pass tells
        whether the search can succeed at all. The answer is the one upstream's exhaustive search
        would reach, without its cost (but with a different step count). Whenever the search could
        instead end in an error (a selector that fails to evaluate, an All-mode request with
        constraints), this says False and the full search runs.
        """
        alternatives_per_request = [alts for data in self.claims for alts in data.requests]
        if any(rd.all_mode and rd.trackers for alts in alternatives_per_request for rd in alts):
            return False
        if not any(all(self._short(rd) for rd in alts) for alts in alternatives_per_request):
            return False
        # Some request is short. Upstream would still search, and could meet a selector that fails
        # to evaluate on the way: only skip the search if no selector fails on any device.
        if any(
            self._static_reason(rd, device) == Reason.SELECTOR_ERROR
            for alts in alternatives_per_request
            for rd in alts
            for device in self.view.candidates
        ):
            return False
        # Every request was looked at, so the explanation must not call any of them unreached.
        for alts in alternatives_per_request:
            for rd in alts:
                rd.reached = True
        return True

    def _short(self, rd: RequestData) -> bool:
        """Fewer devices pass every check on their own than the request needs (stops counting early)."""
        if rd.all_mode:
            return not rd.all_devices
        needed = rd.num_devices
        if needed <= 0:
            return False
        usable = 0
        scan_list = self._scan_list(rd)
        for device, known in zip(scan_list.devices, scan_list.checked, strict=True):
            # A device the scan list knows to pass the request's own checks can only fail the rest.
            code = self._static_reason(rd, device) if known == CHECK else self._other_reason(rd, device)
            if code == Reason.SELECTOR_ERROR:
                return False
            if code == _USABLE:
                usable += 1
                if usable >= needed:
                    return False
        return True

    # --- explanations ------------------------------------------------------------------------------

    def explain(self) -> Explanation:
        """Per request, how the node's devices fared; only called when there is no solution."""
        requests: list[RequestExplanation] = []
        for data in self.claims:
            for alternatives in data.requests:
                requests.extend(self._explain_request(data, rd) for rd in alternatives)
        pools = tuple(
            PoolProblem(
                p.driver, p.name, "incomplete", f"{p.slices_seen} of {p.slices_wanted} slices published"
            )
            if p.incomplete
            else PoolProblem(p.driver, p.name, "invalid", p.invalid_reason or "")
            for p in self.view.pools
            if not p.usable
        )
        return Explanation(self.view.node_name, tuple(requests), pools, self.result_limit_hit)

    def _explain_request(self, data: ClaimData, rd: RequestData) -> RequestExplanation:
        counts: dict[int, int] = {}
        by_selector: dict[tuple[str, int], int] = {}
        for device in self.view.candidates:
            code = self._static_reason(rd, device)
            if code == _USABLE:
                code = rd.why.get(device.index, _USABLE)
            elif code in (Reason.CLASS_SELECTOR, Reason.REQUEST_SELECTOR):
                key = _refusing_selector(rd, device, code)
                by_selector[key] = by_selector.get(key, 0) + 1
            counts[code] = counts.get(code, 0) + 1
        rejected = {text[0]: counts[reason] for reason, text in REASON_TEXT.items() if counts.get(reason)}
        constraints = tuple(
            _constraint_rejection(tracker, counts.get(Reason.CONSTRAINT + tracker.index, 0))
            for tracker in rd.trackers
            if counts.get(Reason.CONSTRAINT + tracker.index)
        )
        selectors = tuple(
            SelectorRejection(
                source,
                index,
                _expression(rd.class_selectors if source == "class" else rd.selectors, index),
                devices,
            )
            for (source, index), devices in sorted(by_selector.items())
        )
        return RequestExplanation(
            claim=data.key,
            request=rd.full_name,
            device_class=rd.class_name,
            allocation_mode=rd.mode,
            wanted=rd.num_devices,
            reached=rd.reached,
            considered=len(self.view.candidates),
            rejected=rejected,
            constraints=constraints,
            selectors=selectors,
            usable=counts.get(_USABLE, 0),
        )

    def _static_reason(self, rd: RequestData, device: DeviceInfo) -> int:
        """The first check the device fails for the request on its own, ignoring this search's picks."""
        try:
            code = self._selectable(rd, device)
        except AllocationError:
            return Reason.SELECTOR_ERROR
        if code != _USABLE:
            return code
        if not rd.admin and device.uid in self.ctx.allocated_uids:
            return Reason.ALLOCATED
        if self.features.consumable_capacity and not self._capacity_fits(rd, device, count_in_flight=False):
            return Reason.CAPACITY
        return self._other_reason(rd, device)

    def _other_reason(self, rd: RequestData, device: DeviceInfo) -> int:
        """``_static_reason`` for a device that passes the request's selectors, is not allocated
        (or the request asks for admin access) and has the capacity it asks for: counters, taints."""
        features = self.features
        if device.consumes:
            if not features.partitionable_devices:
                return Reason.PARTITIONABLE_OFF
            # A shared device already in use took its counters with its first share.
            shared_in_use = (
                features.consumable_capacity and device.multi and device.uid in self.ctx.aggregated
            )
            pool = self.view.pool_of(device)
            available = self.ctx.peek_counters(pool, self.view.shares_name(pool))
            alone = {name: dict(counters) for name, counters in device.consumes}
            if not shared_in_use and available is not None and not covers(available.sets, alone):
                return Reason.COUNTERS
        if features.device_taints and device.taints and blocks_allocation(device.taints, rd.tolerations):
            return Reason.TAINTED
        return _USABLE


def _note(why: dict[int, int], index: int, code: int) -> None:
    if why.get(index, 0) < code:
        why[index] = code


def _reject(rd: RequestData, device: DeviceInfo, code: int) -> Pick | None:
    """Record why the device was refused for the request; always ``None`` (no pick)."""
    _note(rd.why, device.index, code)
    return None


def _refusing_selector(rd: RequestData, device: DeviceInfo, code: int) -> tuple[str, int]:
    """Which selector turned the device down: the first one whose cached result is false."""
    source, selectors = (
        ("class", rd.class_selectors) if code == Reason.CLASS_SELECTOR else ("request", rd.selectors)
    )
    for index, selector in enumerate(selectors):
        if selector.cel is not None and device.cel.get(selector.cel.expression) is False:
            return source, index
    return source, 0


def _expression(selectors: list[DeviceSelector], index: int) -> str:
    cel = selectors[index].cel if index < len(selectors) else None
    return cel.expression if cel is not None else ""


def _constraint_rejection(tracker: Tracker, devices: int) -> ConstraintRejection:
    return ConstraintRejection(tracker.index, tracker.kind, tracker.attribute, devices)
