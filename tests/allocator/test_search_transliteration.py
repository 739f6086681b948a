"""The optimised search against a plain transliteration of upstream's, on seeded random scenarios.

draguard's search (policies/allocator/search.py) caches selector verdicts, consumption and counter
refusals, scans per-request candidate lists, and filters constraints per request.
Here the same questions go to :class:`Upstream`, a deliberately naive re-expression of the
recursive functions of ``structured/internal/incubating/allocator_incubating.go`` (1.36):
``allocateOne`` (subrequest loop, "all devices" path, the 32-result cut-off and its special error,
claim boundaries that swallow it), ``allocateDevice`` and its undo (in-use and admin checks,
``checkAvailableCounters`` with its pool-name cache, taints, constraint add/roll-back, the picked
set, consumable capacity with the in-flight collection), ``CmpRequestOverCapacity`` with the
request policies of ``incubating/consumable_capacity.go`` (default, validValues, validRange with
min, max and step, in whole units), and the match/distinct constraint trackers. Both must give
the same devices, consumed capacity, and the same number of allocateOne calls.

The scenarios use one driver, one node, one or two pools (a counter slice and a device slice
each) and selectors of the form ``device.attributes["d"].v % m == r``, so the model can evaluate
them itself. Pool-name collisions across drivers, node selection and request policies are covered
by the case files and the other fidelity tests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from policies.allocator import AllocatedState, AllocationOutcome, Allocator, DeviceID, Features
from policies.allocator.search import Search
from policies.api.kinds import decode
from policies.api.quantity import Quantity

RESULTS_MAX = 32


class _MaxExceeded(Exception):
    """upstream errAllocationResultMaxSizeExceeded."""


class _ConstraintError(Exception):
    """upstream's "cannot add device ... because a claim constraint would not be satisfied"."""


class _TooLong(Exception):
    """The model gave up: the scenario costs too many calls to be worth comparing."""


@dataclass
class Policy:
    """A capacity's requestPolicy; a validRange is there when ``min`` is."""

    default: int | None = None
    values: tuple[int, ...] | None = None
    min: int | None = None
    max: int | None = None
    step: int | None = None


@dataclass
class Dev:
    v: int
    g: int | None = None  # the constrained attribute "d/g"
    consumes: int = 0  # units of counter "c" in the pool's set "s"
    multi: bool = False
    mem: int | None = None  # capacity "mem"
    taint: bool = False  # NoSchedule taint with key "k"
    policy: Policy | None = None  # of capacity "mem"


@dataclass
class Alt:
    """One request, or one alternative of a firstAvailable request."""

    mode: str
    pred: tuple[int, int]
    count: int = 1
    cap: int | None = None  # capacity request for "mem"
    tol: bool = False  # tolerates key "k"
    admin: bool = False


@dataclass
class Req:
    alts: list[Alt]
    sub: bool = False  # firstAvailable, even with one alternative


@dataclass
class Scenario:
    pools: dict[str, tuple[int, list[Dev]]]  # pool name -> (counter value, devices)
    claims: list[tuple[list[Req], list[tuple[str, list[str]]]]]  # requests, constraints (kind, names)
    allocated: set[tuple[str, int]] = field(default_factory=set)
    aggregated: dict[tuple[str, int], int] = field(default_factory=dict)  # shares' consumed "mem"
    consumable: bool = True
    taints: bool = True


class _Match:
    def __init__(self, names: list[str]) -> None:
        self.names, self.count, self.ref = set(names), 0, None

    def applies(self, req: str, sub: str | None) -> bool:
        return not self.names or req in self.names or (sub is not None and f"{req}/{sub}" in self.names)

    def add(self, req: str, sub: str | None, g: int | None) -> bool:
        if not self.applies(req, sub):
            return True
        if g is None:
            return False
        if self.count == 0:
            self.ref, self.count = g, 1
            return True
        if g != self.ref:
            return False
        self.count += 1
        return True

    def remove(self, req: str, sub: str | None) -> None:
        if self.applies(req, sub):
            self.count -= 1


class _Distinct(_Match):
    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.kept: dict[str, int] = {}

    def add(self, req: str, sub: str | None, g: int | None) -> bool:
        if not self.applies(req, sub):
            return True
        if g is None:
            return False
        if self.count > 0 and g in self.kept.values():
            return False
        self.kept[req] = g  # keyed by the (parent) request name, as upstream does
        self.count += 1
        return True

    def remove(self, req: str, sub: str | None) -> None:
        if self.applies(req, sub):
            self.kept.pop(req, None)
            self.count -= 1


class Upstream:
    """Upstream's recursive search, written out plainly for the scenario subset above."""

    def __init__(self, sc: Scenario, limit: int = 20_000) -> None:
        self.sc = sc
        self.limit = limit
        self.devs = [(p, i, d) for p in sorted(sc.pools) for i, d in enumerate(sc.pools[p][1])]
        self.calls = 0
        self.picked: dict[tuple[str, int], set[int]] = {}
        self.in_flight: dict[tuple[str, int], dict[str, int]] = {}
        self.available: dict[str, int] = {}
        self.consumed: dict[str, int] = {}
        self.results: list[list[tuple[int, int, int, dict[str, int] | None, bool]]] = []
        self.selected: list[list[int]] = []
        self.cons: list[list[_Match]] = []

    def selects(self, alt: Alt, d: Dev) -> bool:
        m, r = alt.pred
        return d.v % m == r

    def consumption(self, alt: Alt, d: Dev) -> int:
        """What one allocation takes of "mem" (calculateConsumedCapacity), ``d.mem`` not None."""
        assert d.mem is not None
        policy = d.policy
        if alt.cap is None:
            return policy.default if policy is not None and policy.default is not None else d.mem
        if policy is None:
            return alt.cap
        if policy.min is not None:
            if alt.cap < policy.min or policy.step is None:
                return max(alt.cap, policy.min)
            steps = -(-(alt.cap - policy.min) // policy.step)
            return policy.min + steps * policy.step
        if policy.values is not None:
            return next((v for v in policy.values if alt.cap <= v), alt.cap)
        return alt.cap

    def violates(self, amount: int, policy: Policy | None) -> bool:
        """violatesPolicy: the default always passes, else the range or the list decides."""
        if policy is None or amount == policy.default:
            return False
        if policy.min is not None:
            if policy.max is not None and amount > policy.max:
                return True
            return policy.step is not None and (amount - policy.min) % policy.step != 0
        return policy.values is not None and amount not in policy.values

    def capacity_ok(self, alt: Alt, key: tuple[str, int], d: Dev) -> bool:
        if alt.cap is not None and d.mem is None:
            return False
        if d.mem is None:
            return True
        amount = self.consumption(alt, d)
        if self.violates(amount, d.policy):
            return False
        used = self.sc.aggregated.get(key, 0) + amount + self.in_flight.get(key, {}).get("mem", 0)
        return used <= d.mem

    def run(self) -> tuple[Any, ...]:
        self.all_devices: list[list[list[list[int]]]] = []
        for reqs, constraints in self.sc.claims:
            per_claim = []
            minimum = 0
            for req in reqs:
                per_alt = []
                for alt in req.alts:
                    found = []
                    if alt.mode == "All":
                        for k, (p, i, d) in enumerate(self.devs):
                            if self.selects(alt, d) and (
                                not self.sc.consumable or self.capacity_ok(alt, (p, i), d)
                            ):
                                found.append(k)
                    per_alt.append(found)
                per_claim.append(per_alt)
                minimum += min(
                    len(f) if a.mode == "All" else a.count for a, f in zip(req.alts, per_alt, strict=True)
                )
            if minimum > RESULTS_MAX:
                return ("error",)
            self.all_devices.append(per_claim)
            self.cons.append(
                [(_Match if kind == "match" else _Distinct)(names) for kind, names in constraints]
            )
            self.results.append([])
            self.selected.append([0] * len(reqs))
        try:
            done = self.one(0, 0, 0, 0, False, 0)
        except _ConstraintError:
            return ("error",)
        if not done:
            return ("nil", self.calls)
        out = []
        for c, (reqs, _) in enumerate(self.sc.claims):
            items = []
            for r, s, k, used, multi in self.results[c]:
                p, i, _ = self.devs[k]
                name = f"req-{r}/sub-{s}" if reqs[r].sub else f"req-{r}"
                admin = "!" if reqs[r].alts[s].admin else ""
                mem = f"@{used['mem']}" if used else ""
                items.append(f"{name}:{p}/device-{i}{admin}{mem}{'#' if multi else ''}")
            out.append(items)
        return ("ok", out, self.calls)

    def num(self, c: int, r: int, s: int) -> int:
        alt = self.sc.claims[c][0][r].alts[s]
        return len(self.all_devices[c][r][s]) if alt.mode == "All" else alt.count

    def one(self, c: int, r: int, s: int, d: int, in_sub: bool, start: int) -> bool:
        self.calls += 1
        if self.calls > self.limit:
            raise _TooLong
        if c >= len(self.sc.claims):
            return True
        reqs = self.sc.claims[c][0]
        if r >= len(reqs):
            try:
                return self.one(c + 1, 0, 0, 0, False, 0)
            except _MaxExceeded:
                return False
        req = reqs[r]
        if req.sub and not in_sub:
            all_exceeded = True
            for k in range(len(req.alts)):
                try:
                    done = self.one(c, r, k, 0, True, 0)
                except _MaxExceeded:
                    continue
                all_exceeded = False
                if done:
                    self.selected[c][r] = k
                    return True
            if all_exceeded:
                raise _MaxExceeded
            return False
        alt = req.alts[s]
        if alt.mode == "All" and not self.all_devices[c][r][s]:
            return False
        if d >= self.num(c, r, s):
            return self.one(c, r + 1, 0, 0, False, 0)
        if len(self.results[c]) + self.num(c, r, s) - d > RESULTS_MAX:
            raise _MaxExceeded
        if alt.mode == "All":
            if not self.allocate_device(c, r, s, self.all_devices[c][r][s][d], must=True):
                return False
            try:
                done = self.one(c, r, s, d + 1, in_sub, 0)
            except _MaxExceeded:
                self.undo(c)
                raise
            if not done:
                self.undo(c)
            return done
        for k in range(start, len(self.devs)):
            p, i, dev = self.devs[k]
            holders = self.picked.get((p, i), set())
            if alt.admin and c in holders:
                continue
            if not alt.admin and ((p, i) in self.sc.allocated or holders):
                continue
            if not self.selects(alt, dev):
                continue
            if self.sc.consumable and not self.capacity_ok(alt, (p, i), dev):
                continue
            if not self.allocate_device(c, r, s, k, must=False):
                continue
            try:
                done = self.one(c, r, s, d + 1, in_sub, k + 1)
            except _MaxExceeded:
                self.undo(c)
                raise
            if done:
                return True
            self.undo(c)
        return False

    def names(self, c: int, r: int, s: int) -> tuple[str, str | None]:
        return f"req-{r}", (f"sub-{s}" if self.sc.claims[c][0][r].sub else None)

    def allocate_device(self, c: int, r: int, s: int, k: int, must: bool) -> bool:
        p, i, dev = self.devs[k]
        key = (p, i)
        alt = self.sc.claims[c][0][r].alts[s]
        multi = self.sc.consumable and dev.multi
        holders = self.picked.get(key, set())
        if not multi and alt.admin and c in holders:
            return False
        if not alt.admin and (key in self.sc.allocated or holders):
            return False
        capacity_in_use = key in self.sc.aggregated or key in self.in_flight
        if dev.consumes and not (multi and capacity_in_use):
            if p not in self.available:
                left = self.sc.pools[p][0]
                for j, other in enumerate(self.sc.pools[p][1]):
                    if (p, j) in self.sc.allocated or (p, j) in self.sc.aggregated:
                        left -= other.consumes
                self.available[p] = left
            self.consumed[p] = self.consumed.get(p, 0) + dev.consumes
            if self.available[p] < self.consumed[p]:
                self.consumed[p] -= dev.consumes
                return False
        if self.sc.taints and dev.taint and not alt.tol:
            return False  # counters stay reserved: upstream does not release them here
        req, sub = self.names(c, r, s)
        for n, con in enumerate(self.cons[c]):
            if not con.add(req, sub, dev.g):
                if must:
                    raise _ConstraintError
                for earlier in self.cons[c][:n]:
                    earlier.remove(req, sub)
                return False
        self.picked.setdefault(key, set())
        if not multi:
            self.picked[key].add(c)
        used: dict[str, int] | None = None
        if self.sc.consumable:
            if not self.capacity_ok(alt, key, dev):
                return False  # nothing rolled back, as upstream
            if multi:
                used = {} if dev.mem is None else {"mem": self.consumption(alt, dev)}
                current = self.in_flight.setdefault(key, {})
                for name, amount in used.items():
                    current[name] = current.get(name, 0) + amount
        self.results[c].append((r, s, k, used or None, multi))
        return True

    def undo(self, c: int) -> None:
        r, s, k, used, multi = self.results[c].pop()
        p, i, dev = self.devs[k]
        req, sub = self.names(c, r, s)
        for con in self.cons[c]:
            con.remove(req, sub)
        self.picked[(p, i)].discard(c)
        if multi:
            current = self.in_flight.get((p, i))
            if used is not None and current is not None:
                for name, amount in used.items():
                    current[name] -= amount
                if not any(current.values()):
                    del self.in_flight[(p, i)]
        elif dev.consumes:
            self.consumed[p] -= dev.consumes


# --- the same scenario through draguard --------------------------------------------------------------------


def _obj(kind: str, name: str, spec: dict[str, Any], api: str = "resource.k8s.io/v1") -> Any:
    return decode({"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec})


def _device(i: int, d: Dev) -> dict[str, Any]:
    attributes: dict[str, Any] = {"v": {"int": d.v}}
    if d.g is not None:
        attributes["g"] = {"int": d.g}
    dev: dict[str, Any] = {"name": f"device-{i}", "attributes": attributes}
    if d.consumes:
        dev["consumesCounters"] = [{"counterSet": "s", "counters": {"c": {"value": str(d.consumes)}}}]
    if d.multi:
        dev["allowMultipleAllocations"] = True
    if d.mem is not None:
        dev["capacity"] = {"mem": {"value": str(d.mem)}}
        if d.policy is not None:
            dev["capacity"]["mem"]["requestPolicy"] = _policy(d.policy)
    if d.taint:
        dev["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    return dev


def _policy(policy: Policy) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if policy.default is not None:
        body["default"] = str(policy.default)
    if policy.values is not None:
        body["validValues"] = [str(v) for v in policy.values]
    if policy.min is not None:
        limits = {"min": policy.min, "max": policy.max, "step": policy.step}
        body["validRange"] = {k: str(v) for k, v in limits.items() if v is not None}
    return body


def _request(alt: Alt) -> dict[str, Any]:
    m, r = alt.pred
    body: dict[str, Any] = {
        "deviceClassName": "a",
        "allocationMode": alt.mode,
        "selectors": [{"cel": {"expression": f'device.attributes["d"].v % {m} == {r}'}}],
    }
    if alt.mode == "ExactCount":
        body["count"] = alt.count
    if alt.cap is not None:
        body["capacity"] = {"requests": {"mem": str(alt.cap)}}
    if alt.tol:
        body["tolerations"] = [{"key": "k", "operator": "Exists"}]
    if alt.admin:
        body["adminAccess"] = True
    return body


def allocate(sc: Scenario, explain: bool = False) -> AllocationOutcome:
    device_class = _obj("DeviceClass", "a", {"selectors": [{"cel": {"expression": 'device.driver == "d"'}}]})
    slices = []
    for p, (counter, devs) in sc.pools.items():
        pool = {"name": p, "generation": 1, "resourceSliceCount": 2}
        counter_set = [{"name": "s", "counters": {"c": {"value": str(counter)}}}]
        slices.append(
            _obj(
                "ResourceSlice",
                f"cs-{p}",
                {"driver": "d", "pool": pool, "nodeName": "n", "sharedCounters": counter_set},
            )
        )
        devices = [_device(i, d) for i, d in enumerate(devs)]
        slices.append(
            _obj(
                "ResourceSlice", f"ds-{p}", {"driver": "d", "pool": pool, "nodeName": "n", "devices": devices}
            )
        )
    claims = []
    for c, (reqs, constraints) in enumerate(sc.claims):
        requests = []
        for r, req in enumerate(reqs):
            if req.sub:
                subs = [{"name": f"sub-{k}", **_request(a)} for k, a in enumerate(req.alts)]
                requests.append({"name": f"req-{r}", "firstAvailable": subs})
            else:
                requests.append({"name": f"req-{r}", "exactly": _request(req.alts[0])})
        rules = [
            {
                ("matchAttribute" if kind == "match" else "distinctAttribute"): "d/g",
                **({"requests": n} if n else {}),
            }
            for kind, n in constraints
        ]
        claims.append(
            _obj("ResourceClaim", f"claim-{c}", {"devices": {"requests": requests, "constraints": rules}})
        )

    def device_id(key: tuple[str, int]) -> DeviceID:
        return DeviceID("d", key[0], f"device-{key[1]}")

    state = AllocatedState(
        allocated_devices=frozenset(device_id(k) for k in sc.allocated),
        allocated_shared_device_ids=frozenset((device_id(k), f"share-{k[0]}-{k[1]}") for k in sc.aggregated),
        aggregated_capacity={device_id(k): {"mem": Quantity.parse(str(v))} for k, v in sc.aggregated.items()},
    )
    features = Features(
        list_type_attributes=False, consumable_capacity=sc.consumable, device_taints=sc.taints
    )
    node = decode({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    return Allocator(features, state, {"a": device_class}, slices).allocate(node, claims, explain=explain)


def draguard(sc: Scenario) -> tuple[Any, ...]:
    outcome = allocate(sc)
    if outcome.error is not None:
        return ("error",)
    if outcome.results is None:
        return ("nil", outcome.invocations)
    out = []
    for result in outcome.results:
        items = []
        for item in result.devices.results or []:
            mem = f"@{item.consumed_capacity['mem']}" if item.consumed_capacity else ""
            admin = "!" if item.admin_access else ""
            items.append(
                f"{item.request}:{item.pool}/{item.device}{admin}{mem}{'#' if item.share_id else ''}"
            )
        out.append(items)
    return ("ok", out, outcome.invocations)


# --- scenarios ---------------------------------------------------------------------------------------------


def _alt(rng: random.Random, consumable: bool, plain: bool) -> Alt:
    m = rng.choice([1, 1, 2, 3])
    alt = Alt(mode="All" if rng.random() < 0.15 else "ExactCount", pred=(m, rng.randrange(m)))
    # Large counts reach the 32-result cut-off (quickly: they exceed the devices there are).
    alt.count = rng.choice([17, 33]) if rng.random() < 0.08 else rng.choice([1, 1, 2, 3])
    alt.cap = rng.choice([1, 2]) if consumable and rng.random() < 0.3 else None
    alt.tol = rng.random() < 0.3
    alt.admin = plain and rng.random() < 0.1  # subrequests cannot ask for admin access
    return alt


def scenario(rng: random.Random) -> Scenario:
    consumable = rng.random() < 0.7
    pools = {}
    allocated: set[tuple[str, int]] = set()
    aggregated: dict[tuple[str, int], int] = {}
    for p in rng.sample(["p1", "p2", "p3"], rng.choice([1, 2])):
        devs = [
            Dev(
                v=rng.randrange(6),
                g=rng.choice([0, 1, 2, None]),
                consumes=rng.choice([0, 0, 1, 2, 4]),
                multi=rng.random() < 0.3,
                mem=rng.choice([None, 1, 2, 4]),
                taint=rng.random() < 0.15,
            )
            for _ in range(rng.choice([2, 3, 4, 5]))
        ]
        pools[p] = (rng.choice([2, 4, 8]), devs)
        for i, d in enumerate(devs):
            x = rng.random()
            if x < 0.1:
                allocated.add((p, i))
            elif x < 0.25 and consumable and d.multi and d.mem is not None:
                aggregated[(p, i)] = rng.randrange(d.mem + 1)
    claims = []
    for _ in range(rng.choice([1, 2, 2, 3])):
        reqs = []
        for _ in range(rng.choice([1, 2, 3])):
            if rng.random() < 0.35:
                reqs.append(
                    Req([_alt(rng, consumable, False) for _ in range(rng.choice([1, 2, 3]))], sub=True)
                )
            else:
                reqs.append(Req([_alt(rng, consumable, True)]))
        names = [f"req-{r}" for r in range(len(reqs))]
        names += [f"req-{r}/sub-{k}" for r, req in enumerate(reqs) if req.sub for k in range(len(req.alts))]
        constraints = [
            (rng.choice(["match", "distinct"]), rng.sample(names, rng.choice([0, 0, 1, min(2, len(names))])))
            for _ in range(rng.choice([0, 0, 1, 2]))
        ]
        claims.append((reqs, constraints))
    return Scenario(pools, claims, allocated, aggregated, consumable, rng.random() < 0.7)


def wide_scenario(rng: random.Random) -> Scenario:
    """Many interchangeable devices and counts around the 32-result limit, with alternatives."""
    devs = [Dev(v=rng.randrange(2)) for _ in range(rng.choice([20, 34, 40]))]
    counts = [1, 2, 15, 16, 17, 31, 32, 33]
    claims = []
    for _ in range(rng.choice([1, 2])):
        reqs = []
        for _ in range(rng.choice([1, 2, 3])):
            alts = [
                Alt(
                    "All" if rng.random() < 0.1 else "ExactCount",
                    (rng.choice([1, 1, 2]), 0),
                    rng.choice(counts),
                )
                for _ in range(rng.choice([1, 2, 3]))
            ]
            reqs.append(Req(alts, sub=len(alts) > 1 or rng.random() < 0.2))
        claims.append((reqs, []))
    return Scenario({"p1": (0, devs)}, claims, consumable=False, taints=False)


def partitions_scenario(rng: random.Random) -> Scenario:
    """Partitions of one device: runs of partitions of 2 units (even ``v``) and of 1 unit (odd), a
    request for any of them and one for big ones, often more than the counter holds."""
    devs = []
    for _ in range(rng.choice([2, 3])):
        units = rng.choice([1, 2])
        devs += [
            Dev(v=2 * rng.randrange(3) + 2 - units, consumes=units) for _ in range(rng.choice([2, 4, 6]))
        ]
    reqs = [
        Req([Alt("ExactCount", (1, 0), rng.choice([2, 3, 4]))]),
        Req([Alt("ExactCount", (2, 0), rng.choice([1, 2, 3]))]),
    ]
    return Scenario({"p1": (rng.choice([6, 8, 10]), devs)}, [(reqs, [])], consumable=False, taints=False)


def _random_policy(rng: random.Random) -> Policy | None:
    kind = rng.choice(["none", "default", "values", "range", "range"])
    default = rng.choice([None, 1, 2])
    if kind == "none":
        return None
    if kind == "default":
        return Policy(default=rng.choice([1, 2, 3]))
    if kind == "values":
        return Policy(default, values=tuple(sorted(rng.sample([1, 2, 3, 4, 6, 8], rng.choice([1, 2, 3])))))
    return Policy(
        default, min=rng.choice([1, 2]), max=rng.choice([None, 4, 6, 9]), step=rng.choice([None, 1, 2, 3])
    )


def shares_scenario(rng: random.Random) -> Scenario:
    """Consumable capacity as networks use it: mostly shared devices with request policies and
    existing shares, several requests and claims asking for amounts (or the policy's default), some
    in All mode or for several devices, under distinct or match constraints."""
    devs = [
        Dev(
            v=rng.randrange(4),
            g=rng.choice([0, 1, 2, 3]),
            multi=rng.random() < 0.85,
            mem=rng.choice([4, 8, 10, 16]),
            taint=rng.random() < 0.05,
            policy=_random_policy(rng),
        )
        for _ in range(rng.choice([3, 4, 6, 8]))
    ]
    aggregated = {
        ("p1", i): rng.randrange(d.mem + 1)
        for i, d in enumerate(devs)
        if d.multi and d.mem and rng.random() < 0.7
    }
    allocated = {("p1", i) for i, d in enumerate(devs) if not d.multi and rng.random() < 0.2}
    claims = []
    for _ in range(rng.choice([1, 2, 3])):
        reqs = []
        for _ in range(rng.choice([1, 2, 3])):
            alts = []
            for _ in range(rng.choice([1, 1, 1, 2])):
                m = rng.choice([1, 1, 2])
                alt = Alt(
                    "All" if rng.random() < 0.12 else "ExactCount",
                    (m, rng.randrange(m)),
                    rng.choice([1, 1, 2, 3]),
                )
                alt.cap = rng.choice([None, 1, 2, 3, 4, 5, 7])
                alt.tol = rng.random() < 0.2
                alts.append(alt)
            reqs.append(Req(alts, sub=len(alts) > 1))
        names = [f"req-{r}" for r in range(len(reqs))]
        constraints = [
            (rng.choice(["match", "distinct", "distinct"]), rng.sample(names, rng.choice([0, len(names)])))
            for _ in range(rng.choice([0, 0, 1]))
        ]
        claims.append((reqs, constraints))
    return Scenario({"p1": (0, devs)}, claims, allocated, aggregated)


def compare(make: Any, seed: int, scenarios: int) -> None:
    rng = random.Random(seed)
    compared = 0
    while compared < scenarios:
        sc = make(rng)
        try:
            expected = Upstream(sc).run()
        except _TooLong:
            continue
        assert draguard(sc) == expected, sc
        compared += 1


@pytest.mark.parametrize("seed", range(4))
def test_search_matches_a_plain_transliteration_of_upstream(seed: int) -> None:
    compare(scenario, seed, 40)


@pytest.mark.parametrize("seed", range(4))
def test_consumable_capacity_with_request_policies_matches_upstream(seed: int) -> None:
    compare(shares_scenario, 100 + seed, 60)


@pytest.mark.parametrize("seed", range(2))
def test_result_limit_handling_matches_upstream(seed: int) -> None:
    compare(wide_scenario, seed, 40)


def test_a_scan_ended_early_leaves_the_notes_a_full_scan_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan ends at a counters refusal when the devices after it could only repeat notes already
    made (``Search._rest_noted``). The explanation of a failure is built from those notes, so it
    must be the same as when every scan runs to its end, and so must the steps and the results."""
    rng = random.Random(7)
    scenarios = [scenario(rng) for _ in range(300)] + [partitions_scenario(rng) for _ in range(100)]
    ended = 0
    rest_noted = Search._rest_noted

    def counted(search: Search, *args: Any) -> bool:
        nonlocal ended
        answer = rest_noted(search, *args)
        ended += answer
        return answer

    def outcomes() -> list[tuple[Any, ...]]:
        found = []
        for sc in scenarios:
            outcome = allocate(sc, explain=True)
            explained = outcome.explanation.to_json() if outcome.explanation is not None else None
            found.append((draguard(sc), explained))
        return found

    monkeypatch.setattr(Search, "_rest_noted", counted)
    early = outcomes()
    monkeypatch.setattr(Search, "_rest_noted", lambda search, *args: False)
    assert outcomes() == early
    assert ended > 100  # the scenarios do end scans early
    assert sum(explained is not None for _, explained in early) > 100  # and explain failures


def test_partitions_match_upstream() -> None:
    compare(partitions_scenario, 3, 40)
