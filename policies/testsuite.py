"""Policy test suites: a plain YAML file of objects and the answers draguard should give for them.

In the spirit of ``kyverno test``: a suite names a cluster state (manifests), optionally a
draguard config, and tests. An admission test is one write (operation, object, old object,
subresource, user) and the expected answer (``allow``, ``deny`` or ``warn``, the message, the
warnings, the JSONPatch); an allocation test is a Pod or claims and the nodes they should fit on.
The answers come from the same functions the webhook and ``draguard allocate`` use
(:func:`policies.rules.engine.admit`, :class:`policies.dryrun.DryRun`), so a suite that passes
here describes what the cluster will see.

What an expectation means:

* ``deny``: the request is refused; ``messageContains`` must be in the refusal message.
* ``warn``: allowed with at least one warning; ``messageContains`` must be in one of them.
* ``allow``: allowed; warnings are permitted (a warning never blocks anything) unless the test says
  ``warnings:``. ``warnings: []`` demands none; a list of texts demands exactly that many warnings,
  each containing one of the texts.
* ``patch``: when given, the JSONPatch must be exactly this (``[]``: no mutation); when absent it is
  not checked.

Mutating and validating rules run together on the object as written, as the rules expect of the
offline commands (see :mod:`policies.rules.prescheduled`).

Everything here is pure: the CLI reads files and hands in the state and a reader for the files a
test names (:data:`Reader`), and the time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel

from policies.api.admission import UserInfo
from policies.api.base import TypedObject
from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import KINDS
from policies.api.resource import ResourceClaim
from policies.config import Config, ConfigError, parse_config
from policies.dryrun import (
    ClaimNotFoundError,
    DryRun,
    FeatureGates,
    Prepared,
    Question,
    pod_claims,
    synthetic_pod,
    with_uid,
)
from policies.fileproblems import problem
from policies.priority import Priorities, PriorityRefused, admitted
from policies.reading import read as read_document
from policies.rules.engine import Context, Decision, Request, Rule, admit
from policies.rules.request import RequestError, UndecodableObject, request_from
from policies.snapshot import Snapshot

T = TypeVar("T")

# Who writes when a test gives no userInfo: an ordinary authenticated user, neither admin nor driver.
DEFAULT_USER = UserInfo(username="draguard-test", groups=["system:authenticated"])


class SuiteError(Exception):
    """A suite that cannot run; ``problems`` are ``field.path: message`` lines."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


Reader = Callable[[str], list[Any]]
"""Reads a file a suite names (relative to the suite): its documents as raw JSON, in order;
raises :class:`SuiteError` with one message when it cannot."""


# --- the suite file ------------------------------------------------------------------------------


class SuiteModel(BaseModel):
    """Strict and camelCase, like the config: an unknown or misspelled key is an error, not ignored."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", frozen=True)


_MANIFEST = "must be a file name (relative to the suite) or an inline object"


class SuiteUser(SuiteModel):
    username: str = ""
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] | None = None

    def user_info(self) -> UserInfo:
        return UserInfo(username=self.username, uid=self.uid, groups=list(self.groups), extra=self.extra)


class AdmissionTest(SuiteModel):
    name: str
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    object: Any = None
    old_object: Any = None
    sub_resource: str = ""
    namespace: str | None = None
    user_info: SuiteUser | None = None
    expect: Literal["allow", "deny", "warn"]
    message_contains: str | None = None
    warnings: tuple[str, ...] | None = None
    patch: list[dict[str, Any]] | None = None

    @field_validator("object", "old_object")
    @classmethod
    def _manifest(cls, value: Any) -> Any:
        if value is None or isinstance(value, (str, Mapping)):
            return value
        raise ValueError(_MANIFEST)


class AllocationTest(SuiteModel):
    name: str
    allocate: Any
    expect_nodes: tuple[str, ...]

    @field_validator("allocate")
    @classmethod
    def _manifests(cls, value: Any) -> Any:
        if isinstance(value, (str, Mapping)):
            return value
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            return value
        raise ValueError(f"{_MANIFEST}, or a list of inline objects")


def _test_kind(value: Any) -> str:
    return "allocation" if isinstance(value, Mapping) and "allocate" in value else "admission"


_TAGS = ("admission", "allocation")

PolicyTest = Annotated[
    Annotated[AdmissionTest, Tag("admission")] | Annotated[AllocationTest, Tag("allocation")],
    Discriminator(_test_kind),
]


class Suite(SuiteModel):
    name: str
    config: Any = None
    state: tuple[str, ...] = ()
    features: str | None = None
    tests: list[PolicyTest] = Field(min_length=1)

    @field_validator("config")
    @classmethod
    def _config(cls, value: Any) -> Any:
        if value is None or isinstance(value, (str, Mapping)):
            return value
        raise ValueError("must be a config file name (relative to the suite) or an inline config")


def parse_suite(data: Any) -> Suite:
    """The suite in ``data`` (a parsed YAML document); raises :class:`SuiteError` naming each field."""
    if not isinstance(data, Mapping):
        raise SuiteError(["<root>: must be a mapping with name, tests and optionally config and state"])
    try:
        suite = Suite.model_validate(data)
    except ValidationError as err:
        raise SuiteError([problem(e, Suite, _TAGS) for e in err.errors(include_url=False)]) from None
    problems = [p for i, t in enumerate(suite.tests) if isinstance(t, AdmissionTest)
                for p in _operation_problems(f"tests[{i}]", t)]
    if problems:
        raise SuiteError(problems)
    return suite


def _operation_problems(where: str, test: AdmissionTest) -> list[str]:
    """What the operation needs: CREATE/CONNECT an object, UPDATE both, DELETE only the old one."""
    wanted = {
        "CREATE": (True, False),
        "CONNECT": (True, False),
        "UPDATE": (True, True),
        "DELETE": (False, True),
    }[test.operation]
    problems = []
    for field, needed, given in (
        ("object", wanted[0], test.object is not None),
        ("oldObject", wanted[1], test.old_object is not None),
    ):
        if needed and not given:
            problems.append(f"{where}.{field}: Required value: a {test.operation} test needs it")
        if given and not needed and test.operation == "DELETE":
            problems.append(f"{where}.{field}: Forbidden: a DELETE has no new object; give oldObject only")
    return problems


# --- preparing: every file read, every object decoded, before anything runs ----------------------


@dataclass(frozen=True)
class AdmissionCase:
    test: AdmissionTest
    request: Request


@dataclass(frozen=True)
class AllocationCase:
    test: AllocationTest
    snapshot: Snapshot
    question: Question


@dataclass(frozen=True)
class PreparedSuite:
    name: str
    context: Context
    features: FeatureGates
    cases: tuple[AdmissionCase | AllocationCase, ...]


def _documents(value: Any, field: str, read: Reader) -> list[Any]:
    if isinstance(value, str):
        try:
            return read(value)
        except SuiteError as err:
            raise SuiteError([f"{field}: {p}" for p in err.problems]) from None
    return list(value) if isinstance(value, list) else [value]


def _one(value: Any, field: str, read: Reader) -> Any:
    if value is None:
        return None
    docs = _documents(value, field, read)
    if len(docs) != 1:
        raise SuiteError([f"{field}: {value}: holds {len(docs)} documents; give exactly one object"])
    return docs[0]


def _config(suite: Suite, read: Reader) -> Config:
    if suite.config is None:
        return Config()
    where = f"config ({suite.config})" if isinstance(suite.config, str) else "config"
    raw = _one(suite.config, "config", read)
    try:
        return parse_config(raw)
    except ConfigError as err:
        raise SuiteError([f"{where}: {line}" for line in err.problems]) from None


def _features(suite: Suite) -> FeatureGates:
    try:
        return FeatureGates() if suite.features is None else FeatureGates.parse(suite.features)
    except ValueError as err:
        raise SuiteError([f"features: {err}"]) from None


def _unmodelled(raw: Any) -> bool:
    return isinstance(raw, Mapping) and (raw.get("apiVersion"), raw.get("kind")) not in KINDS


def _admission_case(
    where: str, test: AdmissionTest, state: Sequence[TypedObject], read: Reader, now: datetime
) -> AdmissionCase:
    raw = _one(test.object, f"{where}.object", read)
    raw_old = _one(test.old_object, f"{where}.oldObject", read)
    # A kind draguard does not model is passed to the rules as is, and they let it through: one
    # the API server refuses before any webhook is called (an older DRA version, a kind it does
    # not serve) would pass an "allow" test for nothing. A subresource's object (an Eviction) is
    # no object of its own.
    refused = [
        f"{where}.{field}: {problem}"
        for field, value in (("object", raw), ("oldObject", raw_old))
        if not test.sub_resource and _unmodelled(value)
        for problem in read_document(value).errors
    ]
    if refused:
        raise SuiteError(refused)
    user = test.user_info.user_info() if test.user_info is not None else DEFAULT_USER
    try:
        request = request_from(
            test.operation, raw, raw_old, sub_resource=test.sub_resource, namespace=test.namespace, user=user
        )
    except UndecodableObject as err:
        raise SuiteError([f"{where}.{p}" for p in err.problems]) from None
    except RequestError as err:
        raise SuiteError([f"{where}: {err}"]) from None
    # The API server defaults an object, and resolves a new pod's priority, before any webhook sees it.
    obj = None if request.obj is None else apply_defaults(request.obj, now)
    if isinstance(obj, Pod) and request.operation == "CREATE" and not request.sub_resource:
        try:
            obj = Priorities.among(state).admit(obj)
        except PriorityRefused as err:
            raise SuiteError([f"{where}.object: refused before any webhook is called: {err}"]) from None
    old = None if request.old is None else apply_defaults(request.old, now)
    defaulted = request._replace(obj=obj, old=old)
    return AdmissionCase(test, defaulted)


def _allocation_case(
    where: str, test: AllocationTest, state: Sequence[TypedObject], read: Reader, now: datetime
) -> AllocationCase:
    objects: list[TypedObject] = []
    # Read as `draguard allocate` reads its files: a workload stands for a pod of its template,
    # kinds draguard does not check are skipped, an older DRA version is refused naming the fix.
    for i, raw in enumerate(_documents(test.allocate, f"{where}.allocate", read), start=1):
        reading = read_document(raw)
        if reading.errors:
            raise SuiteError([f"{where}.allocate: document {i}: {p}" for p in reading.errors])
        if reading.obj is not None:
            objects.append(apply_defaults(reading.obj, now))
    objects, refused = Priorities.among([*state, *objects]).store(objects)
    if refused:
        raise SuiteError([f"{where}.allocate: {line}" for line in refused])
    snapshot = Snapshot.build([*state, *objects])
    pods = [o for o in objects if isinstance(o, Pod)]
    claims = [o for o in objects if isinstance(o, ResourceClaim)]
    if len(pods) > 1 or (not pods and not claims):
        raise SuiteError([f"{where}.allocate: give one Pod (its claims and templates may come from the "
                          "state) or ResourceClaims to allocate"])
    if pods:
        try:
            pod_claims(snapshot, pods[0])
        except ClaimNotFoundError as err:
            raise SuiteError([f"{where}.allocate: {err}"]) from None
    if not snapshot.nodes:
        raise SuiteError([f"{where}: the state has no Node objects to allocate on"])
    unknown = [n for n in test.expect_nodes if n not in snapshot.nodes]
    if unknown:
        raise SuiteError([f"{where}.expectNodes: {', '.join(unknown)}: not a Node of the state "
                          f"(nodes: {', '.join(snapshot.nodes)})"])
    if pods:
        question = Question(with_uid(pods[0]))
    else:
        question = Question(synthetic_pod(claims[0].namespace or "default"), tuple(claims))
    return AllocationCase(test, snapshot, question)


def _case(
    where: str,
    test: AdmissionTest | AllocationTest,
    state: Sequence[TypedObject],
    read: Reader,
    now: datetime,
) -> AdmissionCase | AllocationCase:
    if isinstance(test, AdmissionTest):
        return _admission_case(where, test, state, read, now)
    return _allocation_case(where, test, state, read, now)


def _gather(problems: list[str], step: Callable[[], T], fallback: T) -> T:
    """``step()``, or ``fallback`` with its problems added, so one run reports every broken field."""
    try:
        return step()
    except SuiteError as err:
        problems += err.problems
        return fallback


def prepare(suite: Suite, state: Sequence[TypedObject], read: Reader, now: datetime) -> PreparedSuite:
    """Read what the tests name, decode and default it; raises :class:`SuiteError` with every field
    that is wrong, so a broken suite is reported before any test runs."""
    problems: list[str] = []
    config = _gather(problems, lambda: _config(suite, read), Config())
    features = _gather(problems, lambda: _features(suite), FeatureGates())
    objects, refused = admitted([apply_defaults(o, now) for o in state])
    problems += [f"state: {line}" for line in refused]
    cases = [
        _gather(problems, partial(_case, f"tests[{i}]", test, objects, read, now), None)
        for i, test in enumerate(suite.tests)
    ]
    if problems:
        raise SuiteError(problems)
    context = Context(Snapshot.build(objects), config, now)
    return PreparedSuite(suite.name, context, features, tuple(c for c in cases if c is not None))


# --- running -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    """One test's verdict; ``reason`` says what happened (and, on failure, what was expected)."""

    name: str
    passed: bool
    reason: str
    actual: Mapping[str, Any]


@dataclass(frozen=True)
class SuiteResult:
    name: str
    results: tuple[CaseResult, ...]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed


def _answer(decision: Decision) -> str:
    """The decision in a few words: ``denied: ...``, ``allowed with 2 warnings: ...``, ``allowed``."""
    if not decision.allowed:
        return f"denied: {decision.message}"
    patched = f", patched ({len(decision.patch)} operations)" if decision.patch else ""
    if not decision.warnings:
        return f"allowed{patched}"
    count = len(decision.warnings)
    return f"allowed{patched} with {count} warning{'s' if count > 1 else ''}: {' | '.join(decision.warnings)}"


def _unmatched_warnings(expected: Sequence[str], got: Sequence[str]) -> list[str]:
    """Expected texts that no (distinct) warning contains."""
    left = list(got)
    missing = []
    for text in expected:
        hit = next((w for w in left if text in w), None)
        if hit is None:
            missing.append(text)
        else:
            left.remove(hit)
    return missing


def _admission_problem(test: AdmissionTest, decision: Decision) -> str | None:
    """Why the decision is not what the test expects; None when it is."""
    verdict = "deny" if not decision.allowed else ("warn" if decision.warnings else "allow")
    if test.expect != verdict and not (test.expect == "allow" and verdict == "warn"):
        wanted = {"deny": "denied", "warn": "allowed with a warning", "allow": "allowed"}[test.expect]
        return f"expected {wanted}"
    texts = [decision.message] if test.expect == "deny" else list(decision.warnings)
    if test.message_contains is not None and not any(test.message_contains in t for t in texts):
        where = "the message" if test.expect == "deny" else "any warning"
        return f"expected {where} to contain {test.message_contains!r}"
    if test.warnings is not None:
        missing = _unmatched_warnings(test.warnings, decision.warnings)
        if missing or len(test.warnings) != len(decision.warnings):
            return f"expected {len(test.warnings)} warning(s) containing {list(test.warnings)}"
    got = [dict(op) for op in decision.patch]
    if test.patch is not None and test.patch != got:
        return f"expected the patch {json.dumps(test.patch)}, got {json.dumps(got)}"
    return None


def _run_admission(case: AdmissionCase, rules: Sequence[Rule], ctx: Context) -> CaseResult:
    decision = admit(case.request, rules, ctx)
    problem = _admission_problem(case.test, decision)
    actual = {
        "allowed": decision.allowed,
        "message": decision.message,
        "warnings": list(decision.warnings),
        "patch": [dict(p) for p in decision.patch],
        "outcomes": [{"rule": o.rule, "action": o.action, "message": o.message} for o in decision.outcomes],
    }
    answer = _answer(decision)
    reason = answer if problem is None else f"{problem}, got {answer}"
    return CaseResult(case.test.name, problem is None, reason, actual)


def _run_allocation(case: AllocationCase, gates: FeatureGates) -> CaseResult:
    answer = DryRun(Prepared.of(case.snapshot, gates)).answer(case.question)
    fits = [n.node for n in answer.nodes if n.fits]
    misses = {n.node: n.detail or ", ".join(n.reasons) for n in answer.nodes if not n.fits}
    shown = f"fits on {', '.join(fits)}" if fits else "fits on no node"
    expected = sorted(case.test.expect_nodes)
    actual = {"fits": fits, "doesNotFit": misses}
    if sorted(fits) == expected:
        return CaseResult(case.test.name, True, shown, actual)
    wanted = f"expected to fit on {', '.join(expected)}" if expected else "expected to fit on no node"
    why = "; ".join(f"{node}: {misses[node]}" for node in expected if node in misses)
    reason = f"{wanted}, but it {shown}" + (f" ({why})" if why else "")
    return CaseResult(case.test.name, False, reason, actual)


def run_suite(prepared: PreparedSuite, rules: Sequence[Rule]) -> SuiteResult:
    """Every test of the suite, in order."""
    results = [
        _run_admission(case, rules, prepared.context)
        if isinstance(case, AdmissionCase)
        else _run_allocation(case, prepared.features)
        for case in prepared.cases
    ]
    return SuiteResult(prepared.name, tuple(results))
