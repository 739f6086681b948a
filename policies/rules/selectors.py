"""Rule ``selectors``: CEL selectors that do not compile, match nothing, fail, or misspell a name.

A selector that does not compile is denied with its field path and column (compiled in the API
server's "new expressions" environment, as upstream ``validateCELExpression`` in
``pkg/apis/resource/validation/validation.go`` does). Everything else is a warning, because the
cluster may change: each new selector is evaluated against the snapshot's devices in the "stored
expressions" environment the scheduler uses, combined like the allocator combines them (a
request's selectors only see the devices its class selects, dra-reference 4.8), and the rule warns
when it matches no device, fails on some devices (a runtime error aborts the pod's scheduling,
dra-reference 3.2) or reads an attribute or capacity that no device publishes (a misspelled name
silently matches nothing).

Ratcheting: on UPDATE, expressions that the old object already had are neither denied nor
evaluated again, like upstream's stored-expression check, so objects written before a stricter
environment stay updatable and unrelated updates do not repeat old warnings.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

from policies.api.base import TypedObject
from policies.api.resource import (
    Device,
    DeviceClaim,
    DeviceClass,
    DeviceSelector,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from policies.cel import (
    CompileError,
    DeviceBinding,
    Environment,
    EvalError,
    Program,
    SelectorCache,
    bind_device,
)
from policies.config import SelectorsConfig
from policies.footprint import DeviceKey
from policies.rules.common import LISTED, a_few, object_key
from policies.rules.engine import Context, Finding, Request, RuleUnavailable
from policies.snapshot import Devices, Snapshot
from policies.validation.cel import NEW_EXPRESSIONS

STORED_EXPRESSIONS = Environment(kind="stored")
_KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate")


@dataclass(frozen=True)
class Selector:
    """One CEL expression and the field path it was written at."""

    path: str
    expression: str


@dataclass(frozen=True)
class Target:
    """What a set of selectors narrows down: a class (``class_name`` empty) or one (sub)request."""

    path: str
    class_name: str
    selectors: tuple[Selector, ...]


# --- where the selectors are -------------------------------------------------------------------


def _selectors(path: str, selectors: Sequence[DeviceSelector] | None) -> tuple[Selector, ...]:
    # A selector without `cel` is the API server's to reject ("Required value"); nothing to check.
    return tuple(
        Selector(f"{path}.selectors[{i}].cel.expression", s.cel.expression)
        for i, s in enumerate(selectors or ())
        if s.cel is not None
    )


def _claim_targets(path: str, devices: DeviceClaim) -> Iterator[Target]:
    for i, request in enumerate(devices.requests or ()):
        if request.exactly is not None:
            at = f"{path}.requests[{i}].exactly"
            yield Target(at, request.exactly.device_class_name, _selectors(at, request.exactly.selectors))
        for j, sub in enumerate(request.first_available or ()):
            at = f"{path}.requests[{i}].firstAvailable[{j}]"
            yield Target(at, sub.device_class_name, _selectors(at, sub.selectors))


def targets(obj: TypedObject) -> tuple[Target, ...]:
    """The selector groups of a DeviceClass, ResourceClaim or ResourceClaimTemplate."""
    if isinstance(obj, DeviceClass):
        return (Target("spec", "", _selectors("spec", obj.spec.selectors)),)
    if isinstance(obj, ResourceClaim):
        return tuple(_claim_targets("spec.devices", obj.spec.devices))
    if isinstance(obj, ResourceClaimTemplate):
        return tuple(_claim_targets("spec.spec.devices", obj.spec.spec.devices))
    return ()


def _expressions(obj: TypedObject | None) -> frozenset[str]:
    if obj is None:
        return frozenset()
    return frozenset(s.expression for t in targets(obj) for s in t.selectors)


# --- the devices of the cluster ----------------------------------------------------------------


PoolKey = tuple[str, str]
Signature = tuple[str, tuple[str, ...], tuple[str, ...]]
"""What a target's evaluation depends on besides the devices: its class's name and selectors, and
its own selectors (those that compile, in order)."""
# How many signatures a pool remembers outcomes for: the claims of a cluster come from a few
# templates; past this many, a pool forgets them all and they are evaluated again.
POOL_OUTCOMES = 64


@dataclass(frozen=True)
class PoolOutcome:
    """What a target's selectors did to one pool's devices, in a form that adds up over pools:
    how many devices the class admits (all of them for a class's own selectors), how many of
    those each selector matches and fails on (which, why), how many match them all together."""

    candidates: int
    matched: tuple[int, ...]
    errors: tuple[tuple[tuple[str, str], ...], ...]
    together: int


@dataclass(frozen=True, eq=False)
class PoolDevices:
    """One pool's devices of its newest generation, bound for CEL, and the attribute and capacity
    names they publish; one object as long as the snapshot's map of the pool's devices (``source``)
    is the same object, so that what was worked out for it (``outcomes``, by signature) holds."""

    source: Mapping[DeviceKey, Device]
    devices: tuple[DeviceBinding, ...]
    names: Mapping[str, Mapping[str, frozenset[str]]]
    outcomes: dict[Signature, PoolOutcome] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Inventory:
    """The cluster's pools of devices, and the attribute/capacity names published per domain
    (``{"attribute": {"gpu.example.com": {"model", ...}}}``), for the misspelling check.

    ``replaced`` holds, for the pools that differ from the inventory before this one (``base``),
    what that one had (None: a new pool): a target's outcome over the previous inventory is
    brought up to date from them alone."""

    pools: Mapping[PoolKey, PoolDevices]
    drivers: frozenset[str]
    total: int
    base: int = 0  # id() of the inventory before, which a cached outcome holds on to
    replaced: Mapping[PoolKey, PoolDevices | None] = field(default_factory=dict)

    @cached_property
    def names(self) -> Mapping[str, Mapping[str, frozenset[str]]]:
        return _merged_names(self.pools.values())

    def publishes(self, kind: str, domain: str, ident: str) -> bool:
        """Whether some device publishes the name: the first pool that does answers, where
        :attr:`names` would merge every pool's first (a misspelling alone needs them all)."""
        return any(ident in pool.names[kind].get(domain, ()) for pool in self.pools.values())


def current_slices(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    """Slices of the highest generation of each pool: older ones are being replaced (dra-reference 1.3)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.spec.driver, s.spec.pool.name)
        newest[key] = max(newest.get(key, s.spec.pool.generation), s.spec.pool.generation)
    return [s for s in slices if s.spec.pool.generation == newest[(s.spec.driver, s.spec.pool.name)]]


Published = Mapping[str, Mapping[str, frozenset[str]]]
# The names pools publish, one map per distinct content: a fleet's pools publish the same names,
# and a map of frozensets per pool was 7 MiB at 5,000 pools. Never changed once made.
_PUBLISHED: dict[tuple[tuple[str, str, frozenset[str]], ...], Published] = {}
_PUBLISHED_KEPT = 4096


def _published(devices: Iterable[DeviceBinding]) -> Published:
    names: dict[str, dict[str, set[str]]] = {"attribute": {}, "capacity": {}}
    for device in devices:
        for kind, section in (("attribute", "attributes"), ("capacity", "capacity")):
            for domain, ident in device.names(section):
                names[kind].setdefault(domain, set()).add(ident)
    key = tuple((kind, d, frozenset(ids)) for kind, of_kind in names.items() for d, ids in of_kind.items())
    found = _PUBLISHED.get(key)
    if found is None:
        if len(_PUBLISHED) >= _PUBLISHED_KEPT:
            _PUBLISHED.clear()
        found = _PUBLISHED[key] = {kind: {d: ids for k, d, ids in key if k == kind} for kind in names}
    return found


def _merged_names(pools: Iterable[PoolDevices]) -> dict[str, dict[str, frozenset[str]]]:
    names: dict[str, dict[str, set[str]]] = {"attribute": {}, "capacity": {}}
    for pool in pools:
        for kind, by_domain in pool.names.items():
            for domain, ids in by_domain.items():
                names[kind].setdefault(domain, set()).update(ids)
    return {kind: {d: frozenset(ids) for d, ids in by_domain.items()} for kind, by_domain in names.items()}


# --- evaluation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one selector did to a set of devices: how many it matched, where it failed."""

    total: int
    matched: int
    errors: tuple[tuple[str, str], ...]


def _closest(word: str, choices: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return found[0] if found else None


# --- the rule ------------------------------------------------------------------------------------


class SelectorsRule:
    """Deny selectors that do not compile; warn about the ones that will not select what was meant."""

    name = "selectors"
    mutating = False

    def __init__(self) -> None:
        self._cache = SelectorCache(STORED_EXPRESSIONS)
        self._inventory: tuple[Devices, Inventory] | None = None
        self._totals: dict[Signature, tuple[Inventory, PoolOutcome]] = {}

    def applies(self, request: Request, ctx: Context) -> bool:
        return (
            request.kind in _KINDS
            and request.operation in ("CREATE", "UPDATE")
            and not request.sub_resource
            and request.obj is not None
        )

    def costly(self, request: Request, ctx: Context) -> bool:
        return True  # evaluates new selectors against every device of the cluster

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        assert request.obj is not None
        where = f"{request.kind} {object_key(request.obj)}"
        stored = _expressions(request.old) if request.operation == "UPDATE" else frozenset()
        new = [
            t for t in targets(request.obj)
            if request.operation == "CREATE" or any(s.expression not in stored for s in t.selectors)
        ]
        denials = [d for t in new for s in t.selectors if s.expression not in stored
                   for d in _compile_error(where, s, ctx)]
        if denials or not new:
            return denials
        if not ctx.snapshot_fresh:
            raise RuleUnavailable("the cluster snapshot is stale: selectors not checked against devices")
        inventory = self._inventory_of(ctx.snapshot)
        settings = ctx.config.rules.selectors
        return [
            f for t in new for f in self._check_target(where, t, stored, inventory, ctx, settings)
        ]

    def _inventory_of(self, snapshot: Snapshot) -> Inventory:
        """The snapshot's devices by pool, once per device index (the live state's snapshots share
        theirs until a slice changes); a pool whose map of devices is the same object as before
        (the index shares the unchanged pools' maps) is the same :class:`PoolDevices`, with what
        was worked out for it."""
        devices = snapshot.devices
        if self._inventory is not None and self._inventory[0] is devices:
            return self._inventory[1]
        before = self._inventory[1] if self._inventory is not None else None
        if before is not None and self._inventory is not None and devices.base is self._inventory[0]:
            inventory = self._changed(before, devices)
        else:
            inventory = self._rebuilt(before, devices)
        self._inventory = (devices, inventory)
        return inventory

    def _changed(self, before: Inventory, devices: Devices) -> Inventory:
        """``before`` with the pools ``devices`` says changed bound again (or gone), in the index's
        order: a pool updated in place keeps its place, one new or removed and published again
        goes last (``appended``), so findings list devices as a fresh rule lists them."""
        pools = dict(before.pools)
        replaced: dict[PoolKey, PoolDevices | None] = {}
        total = before.total
        for key in devices.changed:
            group = devices.group(key)
            old = pools.get(key)
            if group and old is not None and old.source is group:
                continue
            if group:
                pools[key] = found = self._bound(key, group, old)  # in its place, or last when new
                total += len(found.devices)
            else:
                pools.pop(key, None)
            total -= len(old.devices) if old is not None else 0
            replaced[key] = old
        for key in devices.appended:
            if key in pools:
                pools[key] = pools.pop(key)
        added_or_gone = any(old is None or key not in pools for key, old in replaced.items())
        drivers = frozenset(driver for driver, _ in pools) if added_or_gone else before.drivers
        return Inventory(pools, drivers, total, id(before), replaced)

    def _rebuilt(self, before: Inventory | None, devices: Devices) -> Inventory:
        """Every pool of ``devices``, those whose map is the same object as in ``before`` kept."""
        old = before.pools if before is not None else {}
        pools: dict[PoolKey, PoolDevices] = {}
        replaced: dict[PoolKey, PoolDevices | None] = {}
        for key, group in devices.group_items():
            found = old.get(key)
            if found is None or found.source is not group:
                replaced[key] = found
                found = self._bound(key, group, found)
            pools[key] = found
        replaced.update((key, gone) for key, gone in old.items() if key not in pools)
        drivers = frozenset(driver for driver, _ in pools)
        total = sum(len(p.devices) for p in pools.values())
        return Inventory(pools, drivers, total, id(before) if before else 0, replaced)

    def _bound(
        self, pool: PoolKey, group: Mapping[DeviceKey, Device], old: PoolDevices | None
    ) -> PoolDevices:
        """The pool's devices bound, each binding (with its selector results) taken over from the
        pool as it was (``old``) while the Device is the same object (models are immutable: a
        changed slice brings new ones). Only the pool before is looked in, not a cache of every
        device ever bound: that cache's entries were 9 MiB at 40,000 devices."""
        driver, name = pool
        kept = {id(d): b for d, b in zip(old.source.values(), old.devices, strict=True)} if old else {}
        devices = tuple(
            kept.get(id(device)) or bind_device(driver, device, self._cache.env, pool=name)
            for device in group.values()
        )
        return PoolDevices(group, devices, _published(devices))

    def _check_target(
        self,
        where: str,
        target: Target,
        stored: frozenset[str],
        inventory: Inventory,
        ctx: Context,
        settings: SelectorsConfig,
    ) -> list[Finding]:
        new = [s for s in target.selectors if s.expression not in stored]
        programs = _programs(target.selectors, ctx)
        findings: list[Finding] = []
        if settings.warn_unknown_attributes and inventory.total:
            for selector in (s for s in new if s in programs):
                findings += _unknown_names(where, selector, programs[selector], inventory)
        scope = self._scope(where, target, inventory, ctx, settings)
        if isinstance(scope, list):
            return findings + scope
        class_programs, scope_name = scope
        totals = self._evaluate(inventory, target.class_name, class_programs, programs, ctx)
        if not totals.candidates and target.class_name:
            if settings.warn_no_match:
                none = f"selects none of the {inventory.total} devices in the cluster"
                findings.append(_warn(where, f"{_class_field(target)} {none}"))
            return findings
        selectors = list(programs)
        for selector in new:
            if selector in programs:
                i = selectors.index(selector)
                outcome = Outcome(totals.candidates, totals.matched[i], totals.errors[i])
                findings += _outcome_findings(where, selector, outcome, scope_name, settings)
        if settings.warn_no_match and len(programs) > 1 and all(totals.matched) and not totals.together:
            findings.append(_warn(where, f"{target.path}.selectors match none of the {totals.candidates} "
                                  f"{scope_name} together, although each of them matches some"))
        return findings

    def _scope(
        self, where: str, target: Target, inventory: Inventory, ctx: Context, settings: SelectorsConfig
    ) -> tuple[dict[Selector, Program], str] | list[Finding]:
        """The programs of the class a target's selectors choose within (none for a class's own
        selectors) and how to name its devices; or, for an unknown class, the warning to give."""
        if not target.class_name:
            return {}, "devices in the cluster"
        device_class = ctx.snapshot.classes.get(target.class_name)
        if device_class is None:
            missing = "does not exist (yet); the request cannot be allocated until it does"
            return [_warn(where, f"{_class_field(target)} {missing}")]
        programs = _programs(_selectors("spec", device_class.spec.selectors), ctx)
        return programs, f'devices of DeviceClass "{target.class_name}"'

    def _evaluate(
        self,
        inventory: Inventory,
        class_name: str,
        class_programs: Mapping[Selector, Program],
        programs: Mapping[Selector, Program],
        ctx: Context,
    ) -> PoolOutcome:
        """The target's outcome over every pool, each pool's worked out once per signature (a
        claim made from the same template as an earlier one costs a lookup per pool)."""
        signature: Signature = (
            class_name,
            tuple(s.expression for s in class_programs),
            tuple(s.expression for s in programs),
        )
        found = self._totals.get(signature)
        if found is not None and found[0] is inventory:
            return found[1]
        evaluate = partial(
            self._outcome_of, signature=signature, classes=class_programs, programs=programs, ctx=ctx
        )
        total = None
        if found is not None and id(found[0]) == inventory.base:
            total = _updated(found[1], inventory, signature, evaluate)
        if total is None:
            total = _summed(inventory, len(programs), evaluate)
        if len(self._totals) >= POOL_OUTCOMES:
            self._totals.clear()
        self._totals[signature] = (inventory, total)
        return total

    def _outcome_of(
        self,
        pool: PoolDevices,
        signature: Signature,
        classes: Mapping[Selector, Program],
        programs: Mapping[Selector, Program],
        ctx: Context,
    ) -> PoolOutcome:
        """The pool's outcome for the signature, worked out the first time it is asked for."""
        outcome = pool.outcomes.get(signature)
        if outcome is None:
            _go_on(ctx)
            outcome = self._pool_outcome(pool, classes, programs)
            if len(pool.outcomes) >= POOL_OUTCOMES:
                pool.outcomes.clear()
            pool.outcomes[signature] = outcome
        return outcome

    def _pool_outcome(
        self,
        pool: PoolDevices,
        class_programs: Mapping[Selector, Program],
        programs: Mapping[Selector, Program],
    ) -> PoolOutcome:
        candidates = [d for d in pool.devices if self._all_match(class_programs, d)]
        matched = [0] * len(programs)
        errors: list[list[tuple[str, str]]] = [[] for _ in programs]
        together = 0
        for device in candidates:
            every = True
            for i, program in enumerate(programs.values()):
                try:
                    hit = self._cache.matches(program, device)
                except EvalError as err:
                    errors[i].append((device.device_id, err.message))
                    hit = False
                matched[i] += hit
                every = every and hit
            together += every
        return PoolOutcome(len(candidates), tuple(matched), tuple(map(tuple, errors)), together)

    def _all_match(self, programs: Mapping[Selector, Program], device: DeviceBinding) -> bool:
        """The allocator's verdict for a device: every selector true; an error counts as no."""
        try:
            return all(self._cache.matches(p, device) for p in programs.values())
        except EvalError:
            return False


def _summed(inventory: Inventory, count: int, evaluate: Callable[[PoolDevices], PoolOutcome]) -> PoolOutcome:
    """A target's outcome over every pool of the inventory, in pool order."""
    candidates = together = 0
    matched = [0] * count
    errors: list[list[tuple[str, str]]] = [[] for _ in range(count)]
    for pool in inventory.pools.values():
        outcome = evaluate(pool)
        if not outcome.candidates:
            continue
        candidates += outcome.candidates
        together += outcome.together
        for i, found in enumerate(outcome.matched):
            matched[i] += found
        for i, failed in enumerate(outcome.errors):
            errors[i] += failed
    return PoolOutcome(candidates, tuple(matched), tuple(map(tuple, errors)), together)


def _updated(
    total: PoolOutcome,
    inventory: Inventory,
    signature: Signature,
    evaluate: Callable[[PoolDevices], PoolOutcome],
) -> PoolOutcome | None:
    """``total``, a target's outcome over the inventory before this one, brought up to date from the
    pools that changed; None when that cannot be done by counting (a changed pool's outcome is no
    longer known, or it has errors, whose place in the list is its pool's)."""
    for key, old in inventory.replaced.items():
        pool = inventory.pools.get(key)
        before = old.outcomes.get(signature) if old is not None else None
        after = evaluate(pool) if pool is not None else None
        unknown = old is not None and before is None
        if unknown or any(o is not None and any(o.errors) for o in (before, after)):
            return None
        for part, sign in ((before, -1), (after, 1)):
            if part is not None and part.candidates:
                total = PoolOutcome(
                    total.candidates + sign * part.candidates,
                    tuple(m + sign * n for m, n in zip(total.matched, part.matched, strict=True)),
                    total.errors,
                    total.together + sign * part.together,
                )
    return total


def _class_field(target: Target) -> str:
    return f'{target.path}.deviceClassName: DeviceClass "{target.class_name}"'


def _warn(where: str, message: str) -> Finding:
    return Finding("warn", f"{where}: {message}")


def _go_on(ctx: Context) -> None:
    """Stop when the caller has stopped waiting: each selector may take a tenth of a second to
    compile (10 KiB of CEL) or to evaluate over every device, and a claim may carry hundreds."""
    if ctx.cancelled():
        raise RuleUnavailable("stopped: the answer was no longer awaited")


def _compile_error(where: str, selector: Selector, ctx: Context) -> list[Finding]:
    _go_on(ctx)
    try:
        ctx.compile(selector.expression, NEW_EXPRESSIONS)
    except CompileError as err:
        at = f" at column {err.column}" if err.column is not None else ""
        return [Finding("deny", f"{where}: {selector.path}: invalid CEL expression{at}: {err.message}")]
    return []


def _programs(selectors: Sequence[Selector], ctx: Context) -> dict[Selector, Program]:
    """Selectors compiled as the scheduler compiles stored ones; one that does not compile there is
    left out (it was denied when written, or predates this environment)."""
    programs: dict[Selector, Program] = {}
    for selector in selectors:
        _go_on(ctx)
        try:
            programs[selector] = ctx.compile(selector.expression, STORED_EXPRESSIONS)
        except CompileError:
            continue
    return programs


def _outcome_findings(
    where: str, selector: Selector, outcome: Outcome, scope: str, settings: SelectorsConfig
) -> list[Finding]:
    findings = []
    if outcome.errors:
        findings.append(_warn(where, (
            f"{selector.path} fails on {len(outcome.errors)} of the {outcome.total} {scope}, and a "
            f"failing selector aborts scheduling of any pod whose search reaches such a device: "
            f"{_failures(outcome.errors)}; make the expression safe for every device "
            "(guard optional names with has() or \"name\" in ...)"
        )))
    if settings.warn_no_match and not outcome.matched and len(outcome.errors) < outcome.total:
        findings.append(_warn(where, f"{selector.path} matches none of the {outcome.total} {scope}"))
    return findings


def _failures(errors: Sequence[tuple[str, str]]) -> str:
    """``<why> on <devices>``, grouped by reason: most often every device fails the same way."""
    by_reason: dict[str, list[str]] = {}
    for device, reason in errors:
        by_reason.setdefault(reason, []).append(device)
    return "; ".join(f"{reason} on {a_few(devices)}" for reason, devices in list(by_reason.items())[:LISTED])


def _unknown_names(where: str, selector: Selector, program: Program, inventory: Inventory) -> list[Finding]:
    findings = []
    for kind, domain, ident in program.names_read():
        if inventory.publishes(kind, domain, ident):
            continue
        published = inventory.names[kind]
        if domain in published:
            guess = _closest(ident, published[domain])
            suggestion = f"{domain}/{guess}" if guess else None
        else:
            guess = _closest(domain, published)
            suggestion = f"{guess}/{ident}" if guess else None
        owner = f"of driver {domain}" if domain in inventory.drivers else "in the cluster"
        hint = f'; did you mean "{suggestion}"?' if suggestion else ""
        findings.append(_warn(where, f'{selector.path} reads {kind} "{domain}/{ident}", which no device '
                              f"{owner} publishes{hint}"))
    return findings
