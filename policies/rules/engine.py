"""Run the rules on one admission request and fold their findings into one decision.

A rule only says what it sees (``Finding``: deny-worthy or a warning, maybe a patch); the engine
applies the rule's configured mode (enforce, warn, audit), its namespace exemptions and its failure
policy. Keeping that policy out of the rules means a rule is tested once, and the webhook, the
policy test CLI and the audit command all get the same answer from the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol

from policies.answer import Answer
from policies.api.admission import UserInfo
from policies.api.base import TypedObject
from policies.api.kinds import decode
from policies.cel import Environment, Program, compile_expression
from policies.config import Config, RuleConfig
from policies.jsonpatch import apply_patch
from policies.snapshot import Snapshot

Action = Literal["deny", "warn"]


class Request(NamedTuple):
    """What a rule needs to know about an admission request, decoded once by the caller.

    ``obj``/``old`` are decoded models when the kind is one draguard models; ``raw``/``raw_old``
    are always the JSON as received (an Eviction, for instance, is only read raw).

    A named tuple rather than a frozen dataclass: as immutable, and built in half the time, which
    counts for the one object every admission request makes.
    """

    uid: str
    operation: str
    group: str
    version: str
    kind: str
    resource: str
    sub_resource: str
    namespace: str
    name: str
    user: UserInfo
    obj: TypedObject | None = None
    old: TypedObject | None = None
    raw: Mapping[str, Any] | None = None
    raw_old: Mapping[str, Any] | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class Finding:
    """One thing a rule found: ``deny`` findings block in enforce mode, ``warn`` ones never do.

    ``retry_later``: the refusal lifts by itself once the cluster moves on, as a
    PodDisruptionBudget's does; the webhook then answers 429 Too Many Requests, which eviction
    clients (``kubectl drain``, the cluster autoscaler) retry, where a 403 makes them give up."""

    action: Action
    message: str
    patch: tuple[Mapping[str, Any], ...] = ()
    retry_later: bool = False


@dataclass(frozen=True)
class Context:
    """Everything a rule reads besides the request: the snapshot, its config, the time.

    ``deadline``: when the server will have answered whatever the rule does, on the shell's
    monotonic clock (``policies`` only passes it on). Work with lasting effects, the quota ledger's
    write, must not land after it: the answer sent then would not be the one the write stands for.

    ``cancelled``: whether the caller has stopped waiting for the answer (the deadline passed). A
    rule that works long checks it between steps and raises :class:`RuleUnavailable`, so that work
    nobody waits for does not go on holding a thread and the CPU.

    ``compile``: how a rule compiles a CEL expression it may not have seen: the webhook passes one
    that compiles long expressions in a worker process (``webhook.celworker``), where the time they
    take does not hold up its event loop.

    ``waiting_on_api``: a rule calls it when the rest of its check mostly waits on the API server
    (the quota ledger's write): the webhook then gives the check's turn at computing to the next
    costly check in line, so that checks waiting together for one write do not hold up the ones that
    compute, and arrive together at the ledger.

    ``answer``: settled by the webhook when its answer goes out; a rule registers there what to undo
    of its lasting effects (a ledger charge) if that answer did not admit the request
    (:mod:`policies.answer`). Offline nobody settles it, and nothing is undone.
    """

    snapshot: Snapshot
    config: Config
    now: datetime
    snapshot_fresh: bool = True
    deadline: float | None = None
    cancelled: Callable[[], bool] = lambda: False
    compile: Callable[[str, Environment], Program] = compile_expression
    waiting_on_api: Callable[[], None] = lambda: None
    answer: Answer = field(default_factory=Answer)


class RuleUnavailable(Exception):
    """A rule cannot decide (stale snapshot, missing data); answered per its failure policy."""


class Rule(Protocol):
    """A rule: ``name`` is also its config section; ``mutating`` rules run on ``/mutate``."""

    name: str
    mutating: bool

    def applies(self, request: Request, ctx: Context) -> bool:
        """Cheap pre-check: does this rule look at this kind of request at all?"""
        ...

    def costly(self, request: Request, ctx: Context) -> bool:
        """Whether ``check`` may take long on this request: it evaluates over the whole cluster
        (every device, every node) or waits on the API server. The webhook runs such checks off its
        event loop under the request's deadline, and every other check inline, where a hand-off to
        a thread would cost more than the check itself."""
        ...

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        """The findings; raises :class:`RuleUnavailable` when it cannot decide."""
        ...


@dataclass(frozen=True)
class Outcome:
    """What one rule contributed, after its mode was applied (for logs, metrics and reports)."""

    rule: str
    mode: str
    action: Literal["deny", "warn", "audit", "error"]
    message: str
    retry_later: bool = False


@dataclass(frozen=True)
class Decision:
    """``retry_later``: denied, and every refusal would lift by itself (see :class:`Finding`)."""

    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: tuple[Mapping[str, Any], ...] = ()
    outcomes: tuple[Outcome, ...] = field(default_factory=tuple)
    retry_later: bool = False


def rule_config(config: Config, rule: str) -> RuleConfig:
    settings: RuleConfig = getattr(config.rules, rule)
    return settings


def _apply_mode(rule: str, settings: RuleConfig, finding: Finding) -> Outcome:
    if settings.mode == "audit":
        return Outcome(rule, settings.mode, "audit", finding.message)
    if settings.mode == "warn" or finding.action == "warn":
        return Outcome(rule, settings.mode, "warn", finding.message)
    return Outcome(rule, settings.mode, "deny", finding.message, finding.retry_later)


def _unavailable(rule: str, settings: RuleConfig, reason: str) -> Outcome:
    message = f"draguard could not check rule {rule}: {reason}"
    action: Literal["deny", "warn"] = "deny" if settings.failure_policy == "Fail" else "warn"
    return Outcome(rule, settings.mode, "error" if settings.mode == "audit" else action, message)


# Most requests: every rule looked and found nothing. Decisions are frozen, so one serves them all.
_NOTHING_FOUND = Decision(allowed=True)


def _fold(outcomes: list[Outcome], patch: list[Mapping[str, Any]]) -> Decision:
    if not outcomes:
        return _NOTHING_FOUND
    denies = [o for o in outcomes if o.action == "deny"]
    warnings = tuple(o.message for o in outcomes if o.action in ("warn", "error") and o.mode != "audit")
    return Decision(
        allowed=not denies,
        message="; ".join(o.message for o in denies),
        warnings=warnings,
        patch=tuple(patch) if not denies else (),
        outcomes=tuple(outcomes),
        retry_later=bool(denies) and all(o.retry_later for o in denies),
    )


class Chosen(NamedTuple):
    """A rule that looks at the request at hand, with its settings."""

    rule: Rule
    settings: RuleConfig


def applicable(request: Request, rules: Sequence[Rule], ctx: Context) -> list[Chosen]:
    """The rules that look at ``request``, after namespace exemptions, with their settings. The
    webhook asks first, to send a costly check off its event loop, then calls
    :func:`decide_applicable`; everyone else calls :func:`decide`."""
    chosen = []
    for rule in rules:
        if not rule.applies(request, ctx):  # most rules look at a few kinds: ask that first
            continue
        settings = rule_config(ctx.config, rule.name)
        if not (request.namespace and request.namespace in settings.exempt_namespaces):
            chosen.append(Chosen(rule, settings))
    return chosen


def decide_unavailable(chosen: Sequence[Chosen], reason: str) -> Decision:
    """The answer when the rules could not run at all (the request's deadline passed): every
    applicable rule answers per its failure policy."""
    return _fold([_unavailable(rule.name, settings, reason) for rule, settings in chosen], [])


def decide_applicable(request: Request, chosen: Sequence[Chosen], ctx: Context) -> Decision:
    """Run the chosen rules; deny if any enforced finding denies."""
    outcomes: list[Outcome] = []
    patch: list[Mapping[str, Any]] = []
    for rule, settings in chosen:
        try:
            findings = rule.check(request, ctx)
        except RuleUnavailable as err:
            outcomes.append(_unavailable(rule.name, settings, str(err)))
            continue
        except Exception as err:  # a bug in one rule must not take the webhook down (no HTTP 500)
            outcomes.append(_unavailable(rule.name, settings, f"internal error: {type(err).__name__}: {err}"))
            continue
        for finding in findings:
            outcome = _apply_mode(rule.name, settings, finding)
            outcomes.append(outcome)
            if finding.patch and outcome.action != "audit":
                patch.extend(finding.patch)
    return _fold(outcomes, patch)


def decide(request: Request, rules: Sequence[Rule], ctx: Context) -> Decision:
    """Run every rule of ``rules`` that applies to ``request``; deny if any enforced finding denies."""
    return decide_applicable(request, applicable(request, rules, ctx), ctx)


def admit(request: Request, rules: Sequence[Rule], ctx: Context) -> Decision:
    """The decision of the whole admission chain, for callers that ask every rule at once (the
    policy test CLI, the audit): the mutating rules first, then the validating ones on the object
    as patched, the order in which the API server calls webhooks. Behind the webhook the API server
    does this itself, one rule path at a time."""
    mutated = decide(request, [rule for rule in rules if rule.mutating], ctx)
    if mutated.patch and request.raw is not None:
        raw = apply_patch(request.raw, mutated.patch)
        request = request._replace(raw=raw, obj=decode(raw))
    validated = decide(request, [rule for rule in rules if not rule.mutating], ctx)
    allowed = mutated.allowed and validated.allowed
    refusals = [d for d in (mutated, validated) if not d.allowed]
    return Decision(
        allowed=allowed,
        message="; ".join(m for m in (mutated.message, validated.message) if m),
        warnings=mutated.warnings + validated.warnings,
        patch=mutated.patch if allowed else (),
        outcomes=mutated.outcomes + validated.outcomes,
        retry_later=bool(refusals) and all(d.retry_later for d in refusals),
    )
