"""Audit: what draguard would say about the objects already in a cluster, and the cluster's DRA health.

Two kinds of findings, one shape (:class:`Finding`, a PolicyReport result):

* **policy**: every rule runs on every existing object as if it were being created now, by a
  member of ``system:masters`` (who wrote an object is not known afterwards, so the rules about who
  may write, personas, stay quiet unless the config's admins exclude that group). A pod is checked
  with the claims it has now: template claims by the names recorded in
  ``status.resourceClaimStatuses``, so a scheduled pod whose claims are allocated for its node
  passes, and a pod bound to a node whose claims nobody allocated is reported.
* **health**: facts about the DRA state that no single admission request shows: selectors that match
  no device, pools with missing or stale slices, claims allocated for nodes that are gone, pending
  pods whose claims fit on no node, and allocated devices with a NoExecute taint the claim does not
  tolerate. Selectors that match nothing are reported here only (the selectors rule runs with
  ``warnNoMatch`` off), whatever the rule's mode, since the state is broken either way.

Pure: the objects, the config, the rules and the time come in; ``progress`` is told how far it got.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from policies.api.admission import UserInfo
from policies.api.base import NodeSelector, TypedObject
from policies.api.core import Namespace, Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.api.resource import (
    DeviceClass,
    DeviceTaint,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from policies.cel import CompileError, DeviceBinding, EvalError, Program, SelectorCache, compile_expression
from policies.config import Config
from policies.priority import admitted
from policies.reading import Reading
from policies.rules.common import LISTED, a_few
from policies.rules.engine import Context, Outcome, Rule, admit, rule_config
from policies.rules.request import request_from
from policies.rules.selectors import STORED_EXPRESSIONS, Target, current_slices, targets
from policies.snapshot import Snapshot

# The allocator, the scheduler and the dry run are imported by the health checks that use them:
# validate's selector warnings (selector_warnings) need none of them, and they take longer to import
# than a small validate takes to run.
if TYPE_CHECKING:
    from policies.dryrun import FeatureGates, Prepared

Result = Literal["pass", "fail", "warn", "error", "skip"]
Category = Literal["policy", "health"]
Progress = Callable[[int, int], None]
# Most serious first: the order summaries count them in.
RESULTS: tuple[Result, ...] = ("fail", "warn", "error", "pass", "skip")

AUDIT_USER = UserInfo(username="system:draguard:audit", groups=["system:masters", "system:authenticated"])

# Health checks, by the rule name they report under.
UNMATCHED_SELECTORS = "unmatched-selectors"
INCOMPLETE_POOLS = "incomplete-pools"
STALE_POOL_GENERATIONS = "stale-pool-generations"
CLAIMS_ON_MISSING_NODES = "claims-on-missing-nodes"
UNSCHEDULABLE_PODS = "unschedulable-pods"
NOEXECUTE_TAINTS = "noexecute-taints"
UNDECODABLE = "undecodable-objects"
INVALID_OBJECTS = "invalid-objects"

_RESULTS: Mapping[str, Result] = {"deny": "fail", "warn": "warn", "audit": "warn", "error": "error"}


@dataclass(frozen=True)
class ResourceRef:
    """The object a finding is about, as a PolicyReport names it."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""

    @classmethod
    def of(cls, obj: TypedObject) -> ResourceRef:
        return cls(obj.api_version or "", obj.kind or "", obj.name, obj.namespace, obj.metadata.uid or "")

    def __str__(self) -> str:
        name = f"{self.namespace}/{self.name}" if self.namespace and self.name else self.name
        return " ".join(part for part in (self.kind, name) if part)

    def to_json(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class Finding:
    """One result: ``rule`` is a rule's name (policy) or a health check's; ``resources[0]`` is the
    object it is about (its namespace decides which report it goes to)."""

    category: Category
    rule: str
    result: Result
    message: str
    resources: tuple[ResourceRef, ...]

    @property
    def namespace(self) -> str:
        return self.resources[0].namespace if self.resources else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "rule": self.rule,
            "result": self.result,
            "message": self.message,
            "resources": [r.to_json() for r in self.resources],
        }


@dataclass(frozen=True)
class Report:
    """``terminating``: the namespaces being deleted (sorted), where no PolicyReport can be created."""

    findings: tuple[Finding, ...]
    objects: int
    terminating: tuple[str, ...] = ()

    def count(self, result: Result) -> int:
        return sum(f.result == result for f in self.findings)

    @property
    def failed(self) -> bool:
        return self.count("fail") > 0


def _health(rule: str, result: Result, message: str, *objects: TypedObject) -> Finding:
    return Finding("health", rule, result, message, tuple(ResourceRef.of(o) for o in objects))


def undecodable(raw: Mapping[str, Any], problems: Sequence[str]) -> Finding:
    """An object that could not be read (it was not audited): an ``error`` result naming the fields."""
    found = raw.get("metadata")
    meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    ref = ResourceRef(
        str(raw.get("apiVersion") or ""), str(raw.get("kind") or ""),
        str(meta.get("name") or ""), str(meta.get("namespace") or ""), str(meta.get("uid") or ""),
    )
    return Finding("policy", UNDECODABLE, "error", f"{ref} cannot be read: {'; '.join(problems)}", (ref,))


def undecodable_document(reading: Reading, problems: Sequence[str]) -> Finding:
    """A document of a manifest that could not be read (:mod:`policies.reading`)."""
    ref = ResourceRef(reading.api_version, reading.kind, reading.name, reading.namespace)
    return Finding("policy", UNDECODABLE, "error", f"{ref} cannot be read: {'; '.join(problems)}", (ref,))


def invalid_document(reading: Reading, problems: Sequence[str]) -> Finding:
    """A document that the API server would refuse to create and that no cluster therefore holds
    (a pod the Priority admission plugin refuses): an error, and it is not audited."""
    ref = ResourceRef(reading.api_version, reading.kind, reading.name, reading.namespace)
    return Finding("policy", UNDECODABLE, "error", f"{ref} is not valid: {'; '.join(problems)}", (ref,))


def invalid_object(reading: Reading, warnings: Sequence[str]) -> Finding:
    """What the API server's validation says of an object the cluster holds
    (:func:`policies.validation.documents.judge_existing`): a warning, the object is audited all
    the same, as kube-scheduler evaluates it as it is."""
    ref = ResourceRef(reading.api_version, reading.kind, reading.name, reading.namespace)
    message = f"{ref}: the API server's validation says: {'; '.join(warnings)}"
    return Finding("policy", INVALID_OBJECTS, "warn", message, (ref,))


# --- policy: the rules on every object, as if it were created now ------------------------------


def as_created(obj: TypedObject) -> TypedObject:
    """The object a CREATE would carry today: a pod's template claims become the claims the
    resourceclaim controller made for it (``status.resourceClaimStatuses``), when it made them."""
    if not isinstance(obj, Pod) or obj.status is None or not obj.spec.resource_claims:
        return obj
    statuses = obj.status.resource_claim_statuses or ()
    made = {s.name: s.resource_claim_name for s in statuses if s.resource_claim_name}
    if not made:
        return obj
    refs = [
        ref.model_copy(update={"resource_claim_name": made[ref.name], "resource_claim_template_name": None})
        if ref.resource_claim_template_name and ref.name in made
        else ref
        for ref in obj.spec.resource_claims
    ]
    return obj.model_copy(update={"spec": obj.spec.model_copy(update={"resource_claims": refs})})


def _audit_config(config: Config) -> Config:
    """The config the rules run with here: "matches no device" is a health finding, not repeated."""
    selectors = config.rules.selectors.model_copy(update={"warn_no_match": False})
    return config.model_copy(update={"rules": config.rules.model_copy(update={"selectors": selectors})})


def policy_findings(
    obj: TypedObject, rules: Sequence[Rule], ctx: Context, old: TypedObject | None = None
) -> list[Finding]:
    """Each applicable rule's findings for ``obj`` as a CREATE (an UPDATE of ``old`` when given), or
    ``pass``; ``skip`` where the object's namespace is exempt from the rule."""
    if old is None:
        request = request_from("CREATE", as_created(obj).to_json(), None, user=AUDIT_USER)
    else:
        request = request_from("UPDATE", obj.to_json(), old.to_json(), user=AUDIT_USER)
    ref = (ResourceRef.of(obj),)
    by_rule: dict[str, list[Outcome]] = {}
    for outcome in admit(request, rules, ctx).outcomes:
        by_rule.setdefault(outcome.rule, []).append(outcome)
    findings: list[Finding] = []
    for name in dict.fromkeys(r.name for r in rules if r.applies(request, ctx)):
        if request.namespace and request.namespace in rule_config(ctx.config, name).exempt_namespaces:
            findings.append(Finding("policy", name, "skip", f"namespace {request.namespace} is exempt", ref))
            continue
        outcomes = by_rule.get(name) or []
        findings += [Finding("policy", name, _RESULTS[o.action], o.message, ref) for o in outcomes]
        if not outcomes:
            findings.append(Finding("policy", name, "pass", "", ref))
    return findings


# --- health: selectors that match no device ----------------------------------------------------


class _Devices:
    """The devices of the current pool generations, bound once, and which ones a class selects."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._cache = SelectorCache(STORED_EXPRESSIONS)
        self.all = tuple(
            self._cache.bind(s.spec.driver, s.spec.pool.name, device, s.metadata.generation)
            for s in current_slices(snapshot.slices)
            for device in s.spec.devices or ()
        )
        self._classes = snapshot.classes
        self._of_class: dict[str, tuple[DeviceBinding, ...]] = {}

    def selected(self, programs: Sequence[Program], devices: Iterable[DeviceBinding]) -> list[DeviceBinding]:
        """The devices every program accepts; a device a selector fails on is not selected (as the
        allocator treats it, after reporting the error)."""
        chosen = []
        for device in devices:
            try:
                if all(self._cache.matches(p, device) for p in programs):
                    chosen.append(device)
            except EvalError:
                continue
        return chosen

    def failing_everywhere(self, programs: Sequence[Program], devices: Sequence[DeviceBinding]) -> str | None:
        """The error of the first device when the programs fail on every one of ``devices`` (the
        scheduler stops at a selector's runtime error: nothing using them can ever be allocated)."""
        first = None
        for device in devices:
            try:
                for p in programs:
                    self._cache.matches(p, device)
            except EvalError as err:
                first = first or str(err)
                continue
            return None
        return first

    def of_class(self, name: str) -> tuple[DeviceBinding, ...] | None:
        """The devices DeviceClass ``name`` selects; None when there is no such class."""
        device_class = self._classes.get(name)
        if device_class is None:
            return None
        if name not in self._of_class:
            (target,) = targets(device_class)
            self._of_class[name] = tuple(self.selected(_programs(target), self.all))
        return self._of_class[name]


def _programs(target: Target) -> list[Program]:
    """The target's selectors compiled as the scheduler compiles them; one that does not compile is
    the selectors rule's to report."""
    programs = []
    for selector in target.selectors:
        try:
            programs.append(compile_expression(selector.expression, STORED_EXPRESSIONS))
        except CompileError:
            continue
    return programs


def _request_of(path: str) -> str:
    """``spec.devices.requests[0]`` for a request's own path and for its firstAvailable entries."""
    return path.split(".exactly")[0].split(".firstAvailable")[0]


def _unmatched_requests(obj: TypedObject, devices: _Devices) -> tuple[list[str], bool]:
    """The requests of a claim or template none of whose alternatives can match a device, and
    whether one of them cannot because its selectors fail on every device they see."""
    alternatives: dict[str, list[tuple[Target, int, str | None]]] = {}
    for target in targets(obj):
        candidates = devices.of_class(target.class_name)
        if candidates is None:
            continue  # an unknown class: the selectors rule says so
        programs = _programs(target)
        matched = len(devices.selected(programs, candidates))
        failing = devices.failing_everywhere(programs, candidates) if candidates and not matched else None
        alternatives.setdefault(_request_of(target.path), []).append((target, matched, failing))
    unmatched = []
    failed = False
    for request, found in alternatives.items():
        if any(count for _, count, _ in found):
            continue
        classes = ", ".join(dict.fromkeys(f'DeviceClass "{t.class_name}"' for t, _, _ in found))
        errors = [error for _, _, error in found if error is not None]
        if len(errors) == len(found):
            failed = True
            unmatched.append(
                f"{request}: its selectors fail on every device of {classes} ({errors[0]}), and the "
                "scheduler stops at such an error: no pod using it can be scheduled"
            )
        else:
            unmatched.append(f"{request}: no device of {classes} matches the request's selectors")
    return unmatched, failed


def unmatched_selectors(snapshot: Snapshot) -> list[Finding]:
    """DeviceClasses that select no device, and requests of pending claims and templates that no
    device can satisfy: a warning, or a failure when their selectors fail on every device (a
    runtime error, which aborts the scheduling of every pod using them). Nothing is said about a
    cluster without devices (nothing to compare with)."""
    devices = _Devices(snapshot)
    if not devices.all:
        return []
    findings = []
    for device_class in snapshot.classes.values():
        if devices.of_class(device_class.name):
            findings.append(_health(UNMATCHED_SELECTORS, "pass", "", device_class))
            continue
        (target,) = targets(device_class)
        error = devices.failing_everywhere(_programs(target), devices.all)
        if error is not None:
            message = (f"DeviceClass {device_class.name}: its selectors fail on every one of the "
                       f"{len(devices.all)} devices in the cluster ({error}): no claim of this class can "
                       "be allocated, and the scheduler stops at such an error")
        else:
            message = (f"DeviceClass {device_class.name}: its selectors match none of the {len(devices.all)} "
                       "devices in the cluster, so no claim of this class can be allocated")
        findings.append(_health(UNMATCHED_SELECTORS, "fail" if error else "warn", message, device_class))
    pending: list[ResourceClaim | ResourceClaimTemplate] = [
        c for c in snapshot.claims.values() if c.status is None or c.status.allocation is None
    ]
    for obj in [*pending, *snapshot.templates.values()]:
        unmatched, failed = _unmatched_requests(obj, devices)
        message = f"{ResourceRef.of(obj)}: " + "; ".join(unmatched) if unmatched else ""
        result: Result = "fail" if failed else "warn" if unmatched else "pass"
        findings.append(_health(UNMATCHED_SELECTORS, result, message, obj))
    return findings


# --- health: pools -----------------------------------------------------------------------------


def _pools(slices: Iterable[ResourceSlice]) -> dict[tuple[str, str], list[ResourceSlice]]:
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        pools.setdefault((s.spec.driver, s.spec.pool.name), []).append(s)
    return pools


def _pool_completeness(name: str, current: list[ResourceSlice], generation: int) -> Finding:
    """Whether the newest generation has exactly the slices it declares (dra-reference 4.4: an
    incomplete pool offers no devices)."""
    declared = sorted({s.spec.pool.resource_slice_count for s in current})
    where = f"pool {name} (generation {generation})"
    if len(declared) > 1:
        counts = ", ".join(map(str, declared))
        message = (f"{where}: its ResourceSlices disagree on resourceSliceCount ({counts}); "
                   "the scheduler cannot tell whether the pool is complete")
        return _health(INCOMPLETE_POOLS, "fail", message, *current)
    if len(current) != declared[0]:
        message = (f"{where}: {len(current)} ResourceSlices published but resourceSliceCount is "
                   f"{declared[0]}; the scheduler allocates no device from an incomplete pool until the "
                   "driver publishes exactly that many")
        return _health(INCOMPLETE_POOLS, "fail", message, *current)
    return _health(INCOMPLETE_POOLS, "pass", "", *current)


def pool_health(snapshot: Snapshot) -> list[Finding]:
    """Per pool: complete or not, and slices of older generations still present."""
    findings = []
    for (driver, pool), slices in _pools(snapshot.slices).items():
        name = f"{driver}/{pool}"
        generation = max(s.spec.pool.generation for s in slices)
        current = [s for s in slices if s.spec.pool.generation == generation]
        stale = [s for s in slices if s.spec.pool.generation < generation]
        findings.append(_pool_completeness(name, current, generation))
        if stale:
            older = sorted({s.spec.pool.generation for s in stale})
            findings.append(_health(STALE_POOL_GENERATIONS, "warn", (
                f"pool {name}: {len(stale)} ResourceSlices of older generations "
                f"({', '.join(map(str, older))}) are still present next to generation {generation}: "
                f"{a_few([s.name for s in stale])}; the scheduler ignores them, and the driver should "
                "delete them"
            ), *stale))
        else:
            findings.append(_health(STALE_POOL_GENERATIONS, "pass", "", *current))
    return findings


# --- health: allocated claims --------------------------------------------------------------------


def _named_nodes(selector: NodeSelector) -> list[str]:
    """Node names a selector pins (``metadata.name In [...]``), as the scheduler writes them."""
    return [
        name
        for term in selector.node_selector_terms
        for field in term.match_fields or ()
        if field.key == "metadata.name" and field.operator == "In"
        for name in field.values or ()
    ]


def _matches_a_node(selector: NodeSelector, snapshot: Snapshot) -> bool:
    from policies.allocator.nodes import NodeSelectorError, selector_matches

    for node in snapshot.nodes.values():
        try:
            if selector_matches(selector, node.name, node.labels):
                return True
        except NodeSelectorError:
            return True  # a selector the scheduler cannot read either: not this check's finding
    return False


def claims_on_missing_nodes(snapshot: Snapshot) -> list[Finding]:
    """Allocated claims whose allocation's node selector matches no existing Node (not checked when
    the snapshot has no Nodes at all)."""
    if not snapshot.nodes:
        return []
    findings = []
    for claim in snapshot.allocated_claims():
        assert claim.status is not None and claim.status.allocation is not None
        selector = claim.status.allocation.node_selector
        if selector is None:
            continue  # usable on every node
        if _matches_a_node(selector, snapshot):
            findings.append(_health(CLAIMS_ON_MISSING_NODES, "pass", "", claim))
            continue
        named = _named_nodes(selector)
        nodes = f"node {', '.join(named)}, which no longer exists" if named else "nodes that no longer exist"
        findings.append(_health(CLAIMS_ON_MISSING_NODES, "fail", (
            f"claim {claim.key} is allocated for {nodes}: its devices stay allocated and no pod can use it; "
            "delete the pods using it (the claim is deallocated when none is left) or recreate the claim"
        ), claim))
    return findings


def _device_taints(snapshot: Snapshot) -> dict[tuple[str, str, str], tuple[DeviceTaint, ...]]:
    """Taints of every device of the current pool generations: its own and DeviceTaintRules'."""
    from policies.allocator import device_taints

    return {
        (s.spec.driver, s.spec.pool.name, device.name): device_taints(
            device, s.spec.driver, s.spec.pool.name, snapshot.taint_rules
        )
        for s in current_slices(snapshot.slices)
        for device in s.spec.devices or ()
    }


def noexecute_taints(snapshot: Snapshot) -> list[Finding]:
    """Allocated devices with a NoExecute taint the claim's allocation does not tolerate: the device
    taint eviction controller evicts the pods using the claim."""
    from policies.allocator import tolerates

    taints = _device_taints(snapshot)
    findings = []
    for claim in snapshot.allocated_claims():
        assert claim.status is not None and claim.status.allocation is not None
        devices = claim.status.allocation.devices
        hits = []
        for result in (devices.results or []) if devices is not None else []:
            tolerations = result.tolerations or ()
            for taint in taints.get((result.driver, result.pool, result.device), ()):
                if taint.effect == "NoExecute" and not any(tolerates(t, taint) for t in tolerations):
                    shown = f"{taint.key}={taint.value}" if taint.value else taint.key
                    hits.append(f"{result.driver}/{result.pool}/{result.device} ({shown}:NoExecute)")
        if not hits:
            findings.append(_health(NOEXECUTE_TAINTS, "pass", "", claim))
            continue
        users = [
            f"pod {claim.namespace}/{r.name}" if r.resource == "pods" else f"{r.resource} {r.name}"
            for r in claim.status.reserved_for or ()
        ]
        who = f"its consumers ({a_few(users)}) are evicted" if users else "a pod that uses it will be evicted"
        findings.append(_health(NOEXECUTE_TAINTS, "fail", (
            f"claim {claim.key} has devices tainted NoExecute that it does not tolerate: {a_few(hits)}; "
            f"{who}. Fix or replace the devices, or add a toleration to the claim's requests"
        ), claim))
    return findings


# --- health: pending pods ------------------------------------------------------------------------


def _pending(snapshot: Snapshot) -> list[Pod]:
    """Pods waiting for the scheduler with claims: no node yet, not finished, not being deleted."""
    return [p for p in snapshot.pending.values() if p.spec.resource_claims]


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _unread(pod: Pod, unread: Collection[ResourceRef]) -> list[str]:
    """The claims and claim templates ``pod`` names that are among the documents that could not
    be read."""
    names = {(ref.kind, ref.namespace or DEFAULT_NAMESPACE, ref.name) for ref in unread}
    namespace = pod.namespace or DEFAULT_NAMESPACE
    found = []
    for claim in pod.spec.resource_claims or ():
        if claim.resource_claim_name and ("ResourceClaim", namespace, claim.resource_claim_name) in names:
            found.append(f"ResourceClaim {namespace}/{claim.resource_claim_name}")
        template = claim.resource_claim_template_name
        if template and ("ResourceClaimTemplate", namespace, template) in names:
            found.append(f"ResourceClaimTemplate {namespace}/{template}")
    return found


def pending_pod(pod: Pod, prepared: Prepared, unread: Collection[ResourceRef] = ()) -> list[Finding]:
    """Whether a pending pod fits on some node now, as kube-scheduler's default profile would judge
    it (dra-reference 4.18); ``fail`` with the scheduler's message and each node's reason when it
    fits nowhere. A pod whose claims or templates are in ``unread`` (documents of the input that
    could not be read, each already an error) is not judged: its claims are not missing."""
    from policies.dryrun import DryRun, Question, with_uid

    missing = _unread(pod, unread)
    if missing:
        message = (
            f"pod {pod.key} is not judged: {', '.join(missing)}, in the input, could not be read "
            f"(see {UNDECODABLE})"
        )
        return [_health(UNSCHEDULABLE_PODS, "skip", message, pod)]
    answer = DryRun(prepared).answer(Question(with_uid(pod)))
    if answer.error:
        message = f"pod {pod.key} is pending and cannot be scheduled: {answer.error}"
        return [_health(UNSCHEDULABLE_PODS, "fail", message, pod)]
    if answer.fits:
        return [_health(UNSCHEDULABLE_PODS, "pass", "", pod)]
    reasons = [f"{n.node}: {_one_line(n.detail or ', '.join(n.reasons))}" for n in answer.nodes]
    more = len(reasons) - LISTED
    shown = "; ".join(reasons[:LISTED]) + (f"; and {more} more" if more > 0 else "")
    return [_health(UNSCHEDULABLE_PODS, "fail", (
        f"pod {pod.key} is pending and fits on none of the {len(reasons)} nodes now: "
        f"{answer.message} ({shown})"
    ), pod)]


# --- the whole audit -----------------------------------------------------------------------------


def _steps(
    objects: Sequence[TypedObject],
    rules: Sequence[Rule],
    ctx: Context,
    gates: FeatureGates,
    unread: Collection[ResourceRef],
) -> Iterator[Callable[[], list[Finding]]]:
    """The audit as small steps, so that the caller can show progress."""
    for obj in objects:
        yield partial(policy_findings, obj, rules, ctx)
    snapshot = ctx.snapshot
    for check in (unmatched_selectors, pool_health, claims_on_missing_nodes, noexecute_taints):
        yield partial(check, snapshot)
    pending = _pending(snapshot) if snapshot.nodes else []
    if pending:
        from policies.dryrun import Prepared

        prepared = Prepared.of(snapshot, gates)
        for pod in pending:
            yield partial(pending_pod, pod, prepared, unread)


def audit(
    objects: Sequence[TypedObject],
    rules: Sequence[Rule],
    config: Config,
    now: datetime,
    gates: FeatureGates,
    progress: Progress | None = None,
    unread: Collection[ResourceRef] = (),
) -> Report:
    """Every finding about ``objects`` (as read from files or the API server; defaulted here, and
    each pod's priority resolved as the API server resolves it: a pod it would refuse is among the
    caller's errors already); ``unread``: the documents of the input that could not be read."""
    defaulted, _ = admitted([apply_defaults(o, now) for o in objects])
    ctx = Context(Snapshot.build(defaulted), _audit_config(config), now)
    steps = list(_steps(defaulted, rules, ctx, gates, unread))
    findings: list[Finding] = []
    for done, step in enumerate(steps, start=1):
        findings += step()
        if progress is not None:
            progress(done, len(steps))
    terminating = (o.name for o in defaulted if isinstance(o, Namespace) and o.metadata.deletion_timestamp)
    return Report(tuple(findings), len(defaulted), tuple(sorted(terminating)))


def selector_warnings(
    objects: Sequence[TypedObject],
    rules: Sequence[Rule],
    now: datetime,
    cluster: Snapshot | None = None,
    olds: Sequence[TypedObject | None] = (),
) -> list[list[str]]:
    """For each object: what the selectors rule warns about it, created now among ``objects``
    (``draguard validate`` given slices, so that it and audit agree), or in ``cluster`` (which holds
    ``objects`` already), as an update of its ``olds`` entry where that is not None: a selector
    matching no device, an attribute no device publishes (with the closest name), a class that
    does not exist. Without a cluster, nothing unless ``objects`` hold ResourceSlices and
    DeviceClasses: a picture of the cluster to compare with, not a claim checked on its own."""
    warnings: list[list[str]] = [[] for _ in objects]
    kinds = {type(o) for o in objects}
    if cluster is None and (ResourceSlice not in kinds or DeviceClass not in kinds):
        return warnings
    defaulted = [apply_defaults(o, now) for o in objects]
    selectors = [r for r in rules if r.name == "selectors"]
    ctx = Context(cluster if cluster is not None else Snapshot.build(defaulted), Config(), now)
    for i, obj in enumerate(defaulted):
        if isinstance(obj, (DeviceClass, ResourceClaim, ResourceClaimTemplate)):
            old = olds[i] if i < len(olds) else None
            found = policy_findings(obj, selectors, ctx, old)
            warnings[i] = [f.message for f in found if f.result == "warn"]
    return warnings


# --- PolicyReports -------------------------------------------------------------------------------

REPORT_API_VERSION = "wgpolicyk8s.io/v1alpha2"
REPORT_NAME = "draguard-audit"
_CATEGORIES = {"policy": "DRA policy", "health": "DRA health"}


def _report_result(finding: Finding, seconds: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": "draguard",
        "policy": "draguard",
        "rule": finding.rule,
        "category": _CATEGORIES[finding.category],
        "result": finding.result,
        # "warn" is the one result the report format defines as not scored.
        "scored": finding.result != "warn",
        "timestamp": {"seconds": seconds, "nanos": 0},
        "resources": [r.to_json() for r in finding.resources],
    }
    if finding.message:
        out["message"] = finding.message
    return out


def _report(kind: str, namespace: str, findings: Sequence[Finding], seconds: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": REPORT_NAME, "labels": {"app.kubernetes.io/managed-by": "draguard"}}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": REPORT_API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "summary": {result: sum(f.result == result for f in findings) for result in RESULTS},
        "results": [_report_result(f, seconds) for f in findings],
    }


def policy_reports(report: Report, now: datetime) -> list[dict[str, Any]]:
    """``wgpolicyk8s.io/v1alpha2`` reports: a PolicyReport per namespace that has results (sorted),
    then the ClusterPolicyReport of cluster-scoped objects (always, possibly empty).

    Namespaces being deleted get none: the API server refuses to create anything in them ("unable
    to create new content in namespace ... because it is being terminated"), and one refused
    document fails the whole ``kubectl apply``. See :func:`left_out`."""
    seconds = int(now.timestamp())
    by_namespace: dict[str, list[Finding]] = {}
    for finding in report.findings:
        if finding.namespace not in report.terminating:
            by_namespace.setdefault(finding.namespace, []).append(finding)
    reports = [
        _report("PolicyReport", ns, by_namespace[ns], seconds) for ns in sorted(by_namespace) if ns
    ]
    reports.append(_report("ClusterPolicyReport", "", by_namespace.get("", []), seconds))
    return reports


def left_out(report: Report) -> list[Finding]:
    """The findings :func:`policy_reports` leaves out: those in namespaces being deleted."""
    return [f for f in report.findings if f.namespace and f.namespace in report.terminating]
