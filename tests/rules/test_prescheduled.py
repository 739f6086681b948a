"""Rule prescheduled: pods pinned with spec.nodeName whose claims nobody would allocate."""

from __future__ import annotations

from typing import Any

import pytest
from rule_fixtures import admission, cluster, context

from policies.rules.engine import RuleUnavailable, admit, decide
from policies.rules.prescheduled import PrescheduledRewrite, PrescheduledRule
from policies.rules.registry import RULES

ADVICE = (
    "Use a kubernetes.io/hostname node selector instead of spec.nodeName (spec.nodeSelector "
    "{{kubernetes.io/hostname: {host}}} or a required node affinity) so that the scheduler allocates "
    "the devices"
)


def pod(node: str | None = "node-1", *claims: dict[str, str], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "main", "image": "trainer"}], **spec}
    if node is not None:
        body["nodeName"] = node
    if claims:
        body["resourceClaims"] = list(claims)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}, "spec": body}


def named(name: str, claim: str) -> dict[str, str]:
    return {"name": name, "resourceClaimName": claim}


RUNNING = named("gpu", "running-job")  # allocated on node-1


def check(obj: dict[str, Any], **rules: Any) -> list[tuple[str, str]]:
    return [(f.action, f.message) for f in PrescheduledRule().check(admission(obj), context(**rules))]


def test_claim_allocated_for_that_node_is_allowed() -> None:
    assert check(pod("node-1", RUNNING)) == []


def test_pods_without_node_name_or_claims_are_not_looked_at() -> None:
    rule = PrescheduledRule()
    assert not rule.applies(admission(pod(None, RUNNING)), context())
    assert not rule.applies(admission(pod("node-1")), context())
    update = admission(pod("node-1", RUNNING), operation="UPDATE", old=pod("node-1", RUNNING))
    assert not rule.applies(update, context())


def test_every_unusable_claim_is_named_with_what_is_wrong() -> None:
    claims = (
        named("missing", "nope"),
        named("pending", "three-a100"),
        {"name": "scratch", "resourceClaimTemplateName": "gpu-template"},
        RUNNING,
    )
    assert check(pod("node-2", *claims)) == [("deny", (
        "pod team-a/p sets spec.nodeName node-2, which bypasses the scheduler, so nothing will allocate its "
        'devices: pod claim "missing": claim team-a/nope does not exist; '
        'pod claim "pending": claim team-a/three-a100 is not allocated; '
        'pod claim "scratch": comes from ResourceClaimTemplate team-a/gpu-template: its claim is only '
        "created for the pod, and only the scheduler would allocate it; "
        'pod claim "gpu": claim team-a/running-job is allocated for other nodes. '
        + ADVICE.format(host="node-2")
    ))]


def test_unknown_node_is_said_and_only_its_name_can_match() -> None:
    assert check(pod("node-9", RUNNING)) == [("deny", (
        "pod team-a/p sets spec.nodeName node-9 (a node the cluster snapshot does not have), which bypasses "
        'the scheduler, so nothing will allocate its devices: pod claim "gpu": claim team-a/running-job is '
        "allocated for other nodes. " + ADVICE.format(host="node-9")
    ))]


def test_deny_in_enforce_mode_and_warning_in_warn_mode() -> None:
    request = admission(pod("node-2", RUNNING))
    assert not decide(request, [PrescheduledRule()], context()).allowed
    relaxed = decide(request, [PrescheduledRule()], context(prescheduled={"mode": "warn"}))
    assert relaxed.allowed and relaxed.warnings[0].startswith("pod team-a/p sets spec.nodeName node-2")


def test_mutating_variant_moves_node_name_into_a_hostname_selector() -> None:
    request = admission(pod("node-2", RUNNING))
    ctx = context(prescheduled={"mutate": True})
    findings = PrescheduledRewrite().check(request, ctx)
    assert [(f.action, f.message) for f in findings] == [("warn", (
        "pod team-a/p: draguard replaced spec.nodeName node-2 with the node selector "
        "kubernetes.io/hostname=node-2 so that the scheduler allocates the pod's devices"
    ))]
    assert findings[0].patch == (
        {"op": "remove", "path": "/spec/nodeName"},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": "node-2"}},
    )
    # Validating webhooks see the object as mutated: through the chain the rewritten pod passes,
    # while the pod as sent (the mutating webhook off, or failed open) is still refused.
    assert [f.action for f in PrescheduledRule().check(request, ctx)] == ["deny"]
    decision = admit(request, [PrescheduledRule(), PrescheduledRewrite()], ctx)
    assert decision.allowed and decision.patch == findings[0].patch


def test_rewrite_merges_into_an_existing_selector_and_uses_the_hostname_label() -> None:
    renamed = {"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "node-2", "labels": {"kubernetes.io/hostname": "ip-10-0-0-2"}}}
    ctx = context(cluster(renamed), prescheduled={"mutate": True})
    request = admission(pod("node-2", RUNNING, nodeSelector={"gpu": "yes"}))
    (finding,) = PrescheduledRewrite().check(request, ctx)
    assert finding.patch == (
        {"op": "remove", "path": "/spec/nodeName"},
        {"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1hostname", "value": "ip-10-0-0-2"},
    )


def test_no_rewrite_when_the_hostname_is_unknown_or_contradicted() -> None:
    ctx = context(prescheduled={"mutate": True})
    unknown = admission(pod("node-9", RUNNING))
    assert PrescheduledRewrite().check(unknown, ctx) == []
    assert PrescheduledRule().check(unknown, ctx)[0].action == "deny"
    contradicted = admission(pod("node-2", RUNNING, nodeSelector={"kubernetes.io/hostname": "node-3"}))
    assert PrescheduledRewrite().check(contradicted, ctx) == []
    assert PrescheduledRule().check(contradicted, ctx)[0].action == "deny"
    fine = admission(pod("node-1", RUNNING))
    assert PrescheduledRewrite().check(fine, ctx) == []


def test_mutating_variant_is_off_by_default() -> None:
    assert not PrescheduledRewrite().applies(admission(pod("node-2", RUNNING)), context())


def test_stale_snapshot_cannot_decide() -> None:
    with pytest.raises(RuleUnavailable, match="snapshot is stale"):
        PrescheduledRule().check(admission(pod("node-2", RUNNING)), context(fresh=False))


def test_bad_claim_reference_is_named() -> None:
    assert check(pod("node-1", {"name": "odd"}))[0][1].startswith(
        'pod team-a/p sets spec.nodeName node-1, which bypasses the scheduler, so nothing will allocate its '
        'devices: pod claim "odd": sets neither resourceClaimName nor resourceClaimTemplateName. '
    )


def test_registry_runs_both_variants_from_one_config_section() -> None:
    # Other rules may join the registry; this one must be there once per variant.
    assert [(r.name, r.mutating) for r in RULES if r.name == "prescheduled"] == [
        ("prescheduled", False), ("prescheduled", True),
    ]
    request = admission(pod("node-2", RUNNING))
    ctx = context(prescheduled={"mutate": True})
    mutated = decide(request, [r for r in RULES if r.mutating], ctx)
    assert mutated.allowed and [op["op"] for op in mutated.patch] == ["remove", "add"]
    assert not decide(request, [r for r in RULES if not r.mutating], ctx).allowed  # the pod as sent
    assert admit(request, RULES, ctx).allowed  # the pod as patched
    assert not admit(request, RULES, context()).allowed  # without mutate nothing rewrites it
