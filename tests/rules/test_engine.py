"""The rule engine applies modes, exemptions and failure policies the same way for every rule."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from policies.api.admission import UserInfo
from policies.config import Config
from policies.rules.engine import (
    Context,
    Finding,
    Request,
    RuleUnavailable,
    applicable,
    decide,
    decide_unavailable,
)
from policies.snapshot import Snapshot


@dataclass
class FakeRule:
    """A rule whose findings the test chooses; named after a real rule so it has a config section."""

    name: str
    findings: Sequence[Finding] = ()
    mutating: bool = False
    error: Exception | None = None
    relevant: bool = True

    def applies(self, request: Request, ctx: Context) -> bool:
        return self.relevant

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        if self.error is not None:
            raise self.error
        return self.findings


def request(namespace: str = "team-a") -> Request:
    return Request(
        uid="u1", operation="CREATE", group="", version="v1", kind="Pod", resource="pods",
        sub_resource="", namespace=namespace, name="p", user=UserInfo(username="alice"),
    )


def ctx(**rules: object) -> Context:
    return Context(Snapshot(), Config.model_validate({"rules": rules}), datetime(2026, 1, 1, tzinfo=UTC))


DENY = Finding("deny", "claim gpu is not allocated")
WARN = Finding("warn", "selector matches no device")


def test_enforce_denies_and_keeps_warnings() -> None:
    d = decide(request(), [FakeRule("prescheduled", [DENY]), FakeRule("selectors", [WARN])], ctx())
    assert not d.allowed
    assert d.message == "claim gpu is not allocated"
    assert d.warnings == ("selector matches no device",)


def test_warn_mode_turns_denies_into_warnings() -> None:
    d = decide(request(), [FakeRule("prescheduled", [DENY])], ctx(prescheduled={"mode": "warn"}))
    assert d.allowed
    assert d.warnings == ("claim gpu is not allocated",)


def test_audit_mode_only_records() -> None:
    d = decide(request(), [FakeRule("prescheduled", [DENY, WARN])], ctx(prescheduled={"mode": "audit"}))
    assert d.allowed and d.warnings == ()
    assert [o.action for o in d.outcomes] == ["audit", "audit"]


def test_exempt_namespace_skips_rule() -> None:
    d = decide(request("kube-system"), [FakeRule("prescheduled", [DENY])],
               ctx(prescheduled={"exemptNamespaces": ["kube-system"]}))
    assert d.allowed and d.outcomes == ()


@pytest.mark.parametrize(("policy", "allowed"), [("Fail", False), ("Ignore", True)])
def test_unavailable_rule_follows_failure_policy(policy: str, allowed: bool) -> None:
    rule = FakeRule("selectors", error=RuleUnavailable("cluster snapshot is 900s old"))
    d = decide(request(), [rule], ctx(selectors={"failurePolicy": policy}))
    assert d.allowed is allowed
    text = d.message if not allowed else d.warnings[0]
    assert text == "draguard could not check rule selectors: cluster snapshot is 900s old"


def test_a_crashing_rule_is_an_answer_not_a_crash() -> None:
    crashing = FakeRule("selectors", error=KeyError("x"))
    d = decide(request(), [crashing], ctx(selectors={"failurePolicy": "Fail"}))
    assert not d.allowed
    assert "internal error: KeyError" in d.message


def test_retry_later_only_when_every_refusal_lifts_by_itself() -> None:
    """A temporary refusal next to a lasting one is a lasting refusal: retrying would not help."""
    later = Finding("deny", "driver pod must not be evicted yet", retry_later=True)
    assert decide(request(), [FakeRule("drain", [later])], ctx()).retry_later
    both = [FakeRule("drain", [later]), FakeRule("selectors", [DENY])]
    assert not decide(request(), both, ctx()).retry_later
    assert not decide(request(), [FakeRule("drain", [later])], ctx(drain={"mode": "warn"})).retry_later


def test_patch_is_dropped_when_denied() -> None:
    patched = Finding("warn", "rewrote nodeName", patch=({"op": "remove", "path": "/spec/nodeName"},))
    assert decide(request(), [FakeRule("prescheduled", [patched])], ctx()).patch == patched.patch
    d = decide(request(), [FakeRule("prescheduled", [patched]), FakeRule("selectors", [DENY])], ctx())
    assert d.patch == ()


def test_unknown_config_key_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"rules\.personas\.admins\.grups"):
        Config.model_validate({"rules": {"personas": {"admins": {"grups": ["x"]}}}})


def test_defaults_are_safe_for_a_cluster_that_said_nothing() -> None:
    c = Config()
    assert c.rules.selectors.mode == "enforce" and c.rules.prescheduled.mode == "enforce"
    assert c.rules.personas.mode == "warn" and c.rules.personas.admins.groups == ("system:masters",)
    assert c.rules.drain.driver_pod_selector is None


def test_deadline_answers_per_failure_policy_of_applicable_rules() -> None:
    rules = [FakeRule("selectors"), FakeRule("prescheduled"), FakeRule("drain", relevant=False)]
    strict = ctx(selectors={"failurePolicy": "Fail"})
    d = decide_unavailable(applicable(request(), rules, strict), "deadline of 4s passed")
    assert not d.allowed
    assert d.message == "draguard could not check rule selectors: deadline of 4s passed"
    assert d.warnings == ("draguard could not check rule prescheduled: deadline of 4s passed",)
