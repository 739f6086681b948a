"""policies.audit: the rules over existing objects, the cluster health checks, PolicyReports.

The cluster is examples/gpu-cluster (three nodes; node-1 and node-2 with four A100s each, node-3
with two H100s; team-a/running-job allocated on node-1 with gpu-0 and gpu-1) plus what a test adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from policies.api.base import TypedObject
from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import decode
from policies.audit import (
    AUDIT_USER,
    CLAIMS_ON_MISSING_NODES,
    INCOMPLETE_POOLS,
    NOEXECUTE_TAINTS,
    STALE_POOL_GENERATIONS,
    UNMATCHED_SELECTORS,
    UNSCHEDULABLE_PODS,
    Finding,
    Report,
    ResourceRef,
    audit,
    claims_on_missing_nodes,
    left_out,
    noexecute_taints,
    pending_pod,
    policy_reports,
    pool_health,
    undecodable,
    unmatched_selectors,
)
from policies.config import Config
from policies.dryrun import FeatureGates, Prepared
from policies.rules.registry import RULES
from policies.snapshot import Snapshot
from webhook.manifests import load

CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "gpu-cluster"
NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
TRAINER_UID = "6f1c1f38-5d47-4c1e-9a0e-2d6f7c1d9b01"


@cache
def base() -> tuple[TypedObject, ...]:
    return tuple(x.obj for x in load([str(CLUSTER)]))


def objects(*extra: dict[str, Any], without: Sequence[str] = ()) -> list[TypedObject]:
    """The example cluster minus the objects named in ``without``, plus ``extra``."""
    return [o for o in base() if o.name not in without] + [decode(x) for x in extra]


def snapshot(*extra: dict[str, Any], without: Sequence[str] = ()) -> Snapshot:
    return Snapshot.build(objects(*extra, without=without))


def problems(findings: Sequence[Finding]) -> list[tuple[str, str, str]]:
    """(result, first resource, message) of every finding that is not a pass."""
    return [(f.result, str(f.resources[0]), f.message) for f in findings if f.result != "pass"]


def run(*extra: dict[str, Any], config: Config | None = None, without: Sequence[str] = ()) -> Report:
    return audit(objects(*extra, without=without), RULES, config or Config(), NOW, FeatureGates())


def pod(name: str, node: str | None = None, **claims: str) -> dict[str, Any]:
    """A pod using claims: ``gpu="claim:NAME"`` or ``gpu="template:NAME"``."""
    refs = []
    for ref, source in claims.items():
        kind, _, target = source.partition(":")
        field = "resourceClaimName" if kind == "claim" else "resourceClaimTemplateName"
        refs.append({"name": ref, field: target})
    spec: dict[str, Any] = {"resourceClaims": refs, "containers": [{"name": "main"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": spec,
    }


def as_pod(raw: dict[str, Any]) -> Pod:
    decoded = decode(raw)
    assert isinstance(decoded, Pod)
    return decoded


def claim(name: str, count: int = 1, model: str = "a100", **status: Any) -> dict[str, Any]:
    selector = f'device.attributes["gpu.example.com"].model == "{model}"'
    out: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "count": count,
                            "selectors": [{"cel": {"expression": selector}}],
                        },
                    }
                ]
            }
        },
    }
    if status:
        out["status"] = status
    return out


def allocated_on(node: str, *devices: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    results = []
    for device in devices:
        result: dict[str, Any] = {
            "request": "gpus",
            "driver": "gpu.example.com",
            "pool": node,
            "device": device,
        }
        if tolerations is not None:
            result["tolerations"] = tolerations
        results.append(result)
    return {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        },
    }


def slice_(name: str, pool: str, generation: int, count: int, *devices: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "nic.example.com",
            "nodeName": "node-1",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": list(devices) or [{"name": f"{name}-nic"}],
        },
    }


# --- policy --------------------------------------------------------------------------------------


def test_a_pod_bound_to_a_node_its_claim_is_not_allocated_for_fails_prescheduled() -> None:
    report = run(pod("stuck", "node-2", gpus="claim:three-a100"))
    (finding,) = [f for f in report.findings if f.rule == "prescheduled"]
    assert (finding.category, finding.result, str(finding.resources[0])) == (
        "policy",
        "fail",
        "Pod team-a/stuck",
    )
    assert "claim team-a/three-a100 is not allocated" in finding.message
    assert report.failed


def test_a_scheduled_pod_is_checked_with_the_claims_the_controller_made_for_it() -> None:
    scheduled = pod("inference", "node-1", gpu="template:one-gpu")
    scheduled["metadata"]["uid"] = TRAINER_UID
    scheduled["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "running-job"}]}
    report = run(scheduled)
    assert [(f.rule, f.result) for f in report.findings if f.rule == "prescheduled"] == [
        ("prescheduled", "pass")
    ]
    # Before the controller made the claim, the pod cannot get devices on its node.
    del scheduled["status"]
    (finding,) = [f for f in run(scheduled).findings if f.rule == "prescheduled"]
    assert finding.result == "fail" and "ResourceClaimTemplate team-a/one-gpu" in finding.message


def test_rules_run_as_an_admin_creating_the_object() -> None:
    assert "system:masters" in (AUDIT_USER.groups or [])
    personas = [f for f in run().findings if f.rule == "personas"]
    assert personas and {f.result for f in personas} == {"pass"}


def test_exempt_namespaces_are_skipped_and_modes_decide_the_result() -> None:
    stuck = pod("stuck", "node-2", gpus="claim:three-a100")
    exempt = Config.model_validate({"rules": {"prescheduled": {"exemptNamespaces": ["team-a"]}}})
    (finding,) = [f for f in run(stuck, config=exempt).findings if f.rule == "prescheduled"]
    assert (finding.result, finding.message) == ("skip", "namespace team-a is exempt")
    warn = Config.model_validate({"rules": {"prescheduled": {"mode": "warn"}}})
    (finding,) = [f for f in run(stuck, config=warn).findings if f.rule == "prescheduled"]
    assert finding.result == "warn"


def test_a_selector_matching_nothing_is_a_health_finding_not_a_policy_one() -> None:
    report = run(claim("b200", model="b200"))
    about = [f for f in report.findings if str(f.resources[0]) == "ResourceClaim team-a/b200"]
    assert {(f.category, f.rule, f.result) for f in about} == {
        ("policy", "selectors", "pass"),
        ("health", UNMATCHED_SELECTORS, "warn"),
    }


# --- health --------------------------------------------------------------------------------------


def test_unmatched_selectors() -> None:
    nothing = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "tpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "tpu.example.com"'}}]},
    }
    either = claim("either")
    either["spec"]["devices"]["requests"][0] = {
        "name": "gpus",
        "firstAvailable": [
            {
                "name": "b200",
                "deviceClassName": "gpu.example.com",
                "selectors": [
                    {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "b200"'}}
                ],
            },
            {"name": "any", "deviceClassName": "gpu.example.com"},
        ],
    }
    found = problems(unmatched_selectors(snapshot(nothing, either, claim("b200", model="b200"))))
    assert found == [
        (
            "warn",
            "DeviceClass tpu",
            "DeviceClass tpu: its selectors match none of the 10 devices in the cluster, "
            "so no claim of this class can be allocated",
        ),
        (
            "warn",
            "ResourceClaim team-a/b200",
            "ResourceClaim team-a/b200: spec.devices.requests[0]: no device of "
            'DeviceClass "gpu.example.com" matches the request\'s selectors',
        ),
    ]


def test_allocated_claims_are_not_checked_for_selectors_and_a_cluster_without_devices_is_not_judged() -> None:
    gone = claim("gone", model="b200", **allocated_on("node-1", "gpu-3"))
    assert problems(unmatched_selectors(snapshot(gone))) == []
    empty = Snapshot.build([o for o in base() if o.kind != "ResourceSlice"])
    assert unmatched_selectors(empty) == []


def test_incomplete_and_disagreeing_pools() -> None:
    found = problems(
        pool_health(
            snapshot(
                slice_("a-1", "a", 1, 2),
                slice_("b-1", "b", 1, 1),
                slice_("b-2", "b", 1, 2),
            )
        )
    )
    assert found == [
        (
            "fail",
            "ResourceSlice a-1",
            "pool nic.example.com/a (generation 1): 1 ResourceSlices published but "
            "resourceSliceCount is 2; the scheduler allocates no device from an incomplete pool until the "
            "driver publishes exactly that many",
        ),
        (
            "fail",
            "ResourceSlice b-1",
            "pool nic.example.com/b (generation 1): its ResourceSlices disagree on "
            "resourceSliceCount (1, 2); the scheduler cannot tell whether the pool is complete",
        ),
    ]


def test_stale_generations_are_a_warning_and_do_not_make_the_pool_incomplete() -> None:
    findings = pool_health(snapshot(slice_("a-old", "a", 1, 1), slice_("a-new", "a", 2, 1)))
    about_a = [
        (f.rule, f.result, [str(r) for r in f.resources]) for f in findings if "a-" in str(f.resources[0])
    ]
    assert about_a == [
        (INCOMPLETE_POOLS, "pass", ["ResourceSlice a-new"]),
        (STALE_POOL_GENERATIONS, "warn", ["ResourceSlice a-old"]),
    ]
    (stale,) = [f for f in findings if f.result == "warn"]
    assert (
        "1 ResourceSlices of older generations (1) are still present next to generation 2: a-old"
        in stale.message
    )


def test_claims_allocated_for_nodes_that_are_gone() -> None:
    ghost = claim("ghost", **allocated_on("node-9", "gpu-0"))
    assert problems(claims_on_missing_nodes(snapshot(ghost))) == [
        (
            "fail",
            "ResourceClaim team-a/ghost",
            "claim team-a/ghost is allocated for node node-9, which no longer "
            "exists: its devices stay allocated and no pod can use it; delete the pods using it (the claim "
            "is deallocated when none is left) or recreate the claim",
        ),
    ]
    results = {str(f.resources[0]): f.result for f in claims_on_missing_nodes(snapshot(ghost))}
    assert results["ResourceClaim team-a/running-job"] == "pass"
    assert claims_on_missing_nodes(Snapshot.build([decode(ghost)])) == []  # no Nodes: cannot tell


def test_pending_pods_whose_claims_fit_nowhere() -> None:
    eight = claim("eight", count=8)
    # Defaulted as audit() defaults every object (an undefaulted claim has no allocationMode, which
    # the allocator refuses as a fatal error).
    defaulted = Snapshot.build(apply_defaults(o, NOW) for o in objects(eight))
    prepared = Prepared.of(defaulted, FeatureGates())
    (stuck,) = pending_pod(as_pod(pod("big", gpus="claim:eight")), prepared)
    assert (stuck.rule, stuck.result) == (UNSCHEDULABLE_PODS, "fail")
    # The scheduler's own message first (what kubectl describe pod shows), then each node's reason.
    assert stuck.message.startswith(
        "pod team-a/big is pending and fits on none of the 3 nodes now: 0/3 nodes are available: "
        "3 cannot allocate all claims. still not schedulable, preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling. (node-1: cannot allocate all claims on node node-1; "
    )
    assert "; node-2: " in stuck.message and "; node-3: " in stuck.message and "\n" not in stuck.message
    (fits,) = pending_pod(as_pod(pod("ok", gpus="claim:three-a100")), prepared)
    assert fits.result == "pass"
    (missing,) = pending_pod(as_pod(pod("lost", gpus="claim:nope")), prepared)
    assert missing.message == (
        "pod team-a/lost is pending and cannot be scheduled: pod team-a/lost: claim 'gpus': "
        "resource claim team-a/nope not found"
    )


def test_pending_pods_are_found_by_the_audit() -> None:
    report = run(
        claim("eight", count=8), pod("big", gpus="claim:eight"), pod("bound", "node-1", gpus="claim:eight")
    )
    checked = {str(f.resources[0]): f.result for f in report.findings if f.rule == UNSCHEDULABLE_PODS}
    assert checked == {"Pod team-a/big": "fail"}  # the bound pod is not waiting for the scheduler


def taint(effect: str, key: str = "gpu.example.com/unhealthy") -> dict[str, Any]:
    return {"key": key, "value": "ecc", "effect": effect}


def tainted_cluster(*extra: dict[str, Any], effect: str = "NoExecute") -> Snapshot:
    node1 = next(o for o in base() if o.name == "node-1-gpu.example.com").to_json()
    node1["spec"]["devices"][1]["taints"] = [taint(effect)]
    return snapshot(node1, *extra)


def test_allocated_devices_tainted_noexecute() -> None:
    (found,) = problems(noexecute_taints(tainted_cluster()))
    assert found == (
        "fail",
        "ResourceClaim team-a/running-job",
        (
            "claim team-a/running-job has devices tainted NoExecute that it does not tolerate: "
            "gpu.example.com/node-1/gpu-1 (gpu.example.com/unhealthy=ecc:NoExecute); its consumers "
            "(pod team-a/trainer-0) are evicted. Fix or replace the devices, or add a toleration to the "
            "claim's requests"
        ),
    )
    assert problems(noexecute_taints(tainted_cluster(effect="NoSchedule"))) == []


def test_a_tolerated_taint_is_fine() -> None:
    tolerant = claim(
        "tolerant",
        **allocated_on(
            "node-1",
            "gpu-1",
            tolerations=[{"key": "gpu.example.com/unhealthy", "operator": "Exists", "effect": "NoExecute"}],
        ),
    )
    results = {str(f.resources[0]): f.result for f in noexecute_taints(tainted_cluster(tolerant))}
    assert results["ResourceClaim team-a/tolerant"] == "pass"


def test_taints_from_device_taint_rules_count() -> None:
    rule = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-node-1"},
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1"},
            "taint": taint("NoExecute"),
        },
    }
    (found,) = problems(noexecute_taints(snapshot(rule)))
    assert "gpu.example.com/node-1/gpu-0" in found[2] and "gpu.example.com/node-1/gpu-1" in found[2]


# --- the whole audit and its reports -----------------------------------------------------------


def test_progress_is_reported_up_to_the_total() -> None:
    seen: list[tuple[int, int]] = []
    audit(
        objects(),
        RULES,
        Config(),
        NOW,
        FeatureGates(),
        progress=lambda done, total: seen.append((done, total)),
    )
    total = seen[-1][1]
    assert seen == [(i, total) for i in range(1, total + 1)]
    assert total > len(base())  # one step per object, then the health checks


def test_undecodable_objects_become_error_results() -> None:
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
    finding = undecodable(raw, ["a.yaml: document 1: spec.resourceClaims: must be a list"])
    assert (finding.rule, finding.result, finding.namespace) == ("undecodable-objects", "error", "ns")
    assert (
        finding.message == "Pod ns/p cannot be read: a.yaml: document 1: spec.resourceClaims: must be a list"
    )
    assert finding.resources[0].to_json() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "ns",
        "uid": "u",
    }


def test_policy_reports_one_per_namespace_and_one_for_the_cluster() -> None:
    other = claim("x") | {"metadata": {"name": "x", "namespace": "team-b"}}
    report = run(pod("stuck", "node-2", gpus="claim:three-a100"), other)
    reports = policy_reports(report, NOW)
    assert [(r["kind"], r["metadata"].get("namespace")) for r in reports] == [
        ("PolicyReport", "team-a"),
        ("PolicyReport", "team-b"),
        ("ClusterPolicyReport", None),
    ]
    assert {r["apiVersion"] for r in reports} == {"wgpolicyk8s.io/v1alpha2"}
    results = [result for r in reports for result in r["results"]]
    assert len(results) == len(report.findings)
    for r in reports:
        counted = {
            k: sum(x["result"] == k for x in r["results"]) for k in ("pass", "fail", "warn", "error", "skip")
        }
        assert r["summary"] == counted
    team_a = reports[0]
    failing = [x for x in team_a["results"] if x["result"] == "fail"]
    assert [(x["policy"], x["rule"], x["resources"][0]["name"]) for x in failing] == [
        ("draguard", "prescheduled", "stuck")
    ]
    assert failing[0]["timestamp"] == {"seconds": int(NOW.timestamp()), "nanos": 0}
    assert failing[0]["scored"] is True and failing[0]["category"] == "DRA policy"
    cluster_kinds = {x["resources"][0]["kind"] for x in reports[-1]["results"]}
    assert cluster_kinds == {"DeviceClass", "ResourceSlice"}


def test_namespaces_being_deleted_get_no_policy_report() -> None:
    """The API server creates nothing in a namespace being deleted (seen on the real one: "unable to
    create new content in namespace ... because it is being terminated"), and kubectl apply fails on
    such a document: its results are left out of the reports, and said to be."""
    leaving = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-b", "deletionTimestamp": "2026-01-01T00:00:00Z"},
    }
    other = claim("x") | {"metadata": {"name": "x", "namespace": "team-b"}}
    report = run(pod("stuck", "node-2", gpus="claim:three-a100"), other, leaving)
    assert report.terminating == ("team-b",)
    reports = policy_reports(report, NOW)
    assert [(r["kind"], r["metadata"].get("namespace")) for r in reports] == [
        ("PolicyReport", "team-a"),
        ("ClusterPolicyReport", None),
    ]
    dropped = left_out(report)
    assert dropped and {f.namespace for f in dropped} == {"team-b"}
    assert len(dropped) + sum(len(r["results"]) for r in reports) == len(report.findings)


def test_health_rules_are_named_for_what_they_check() -> None:
    names = {
        f.rule
        for f in run(claim("ghost", **allocated_on("node-9", "gpu-0"))).findings
        if f.category == "health"
    }
    assert {
        UNMATCHED_SELECTORS,
        INCOMPLETE_POOLS,
        STALE_POOL_GENERATIONS,
        CLAIMS_ON_MISSING_NODES,
        NOEXECUTE_TAINTS,
    } <= names


def test_a_resource_without_a_name_or_namespace_reads_cleanly() -> None:
    """The table's RESOURCE column and the messages: no trailing space, no dangling slash."""
    shown = [
        str(ResourceRef("v1", "Pod", "p", "team-a")),
        str(ResourceRef("v1", "Node", "n")),
        str(ResourceRef("v1", "List", "")),
        str(ResourceRef("v1", "Pod", "", "team-a")),
        str(ResourceRef("", "", "")),
    ]
    assert shown == ["Pod team-a/p", "Node n", "List", "Pod", ""]
