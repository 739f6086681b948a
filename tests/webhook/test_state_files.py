"""``serve --state``: the snapshot from manifest files, defaulted like stored objects."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.api.core import Pod
from policies.api.kinds import decode
from policies.config import Config
from policies.scheduler.podinfo import PodInfo
from webhook.manifests import ManifestError
from webhook.state import FileState, relevance

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_example_cluster_loads_synced_and_never_stale() -> None:
    state = FileState.load([str(EXAMPLES / "gpu-cluster"), str(EXAMPLES / "workloads")], NOW)
    snapshot = state.snapshot
    assert state.synced and state.age() == 0.0
    assert sorted(snapshot.nodes) == ["node-1", "node-2", "node-3"]
    assert ("team-a", "inference") in snapshot.pods  # it references a claim template
    claim = snapshot.claims[("team-a", "three-a100")]
    request = claim.spec.devices.requests[0].exactly
    assert request is not None and request.allocation_mode == "ExactCount"


def test_pods_without_claims_and_defaults(tmp_path: Path) -> None:
    (tmp_path / "objs.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: plain, namespace: a}\nspec: {containers: []}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: a}\n"
        "spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}\n"
    )
    snapshot = FileState.load([str(tmp_path)], NOW).snapshot
    assert not snapshot.pods
    exactly = snapshot.claims[("a", "c")].spec.devices.requests[0].exactly
    assert exactly is not None and exactly.count == 1  # defaulted as the API server stores it


def test_unreadable_state_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"missing\.yaml"):
        FileState.load([str(tmp_path / "missing.yaml")], NOW)


def test_the_snapshot_keeps_the_pods_rules_read() -> None:
    """Pods with claims always; DRA driver pods (no claims) when the drain rule names them."""
    def pod(name: str, labels: dict[str, str], claims: bool) -> Pod:
        spec: dict[str, Any] = {"containers": [{"name": "c"}]}
        if claims:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
        metadata = {"name": name, "labels": labels}
        obj = decode({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
        assert isinstance(obj, Pod)
        return obj

    driver = {"app": "gpu-driver"}
    pods = [pod("user", {}, True), pod("driver", driver, False), pod("web", {"app": "x"}, False)]
    selector = {"driverPodSelector": {"matchLabels": {"app": "gpu-driver"}}}
    drain = Config.model_validate({"rules": {"drain": selector}})
    assert [p.name for p in pods if relevance(Config())(PodInfo.of(p))] == ["user"]
    assert [p.name for p in pods if relevance(drain)(PodInfo.of(p))] == ["user", "driver"]
    kept = FileState.from_objects(pods, NOW, relevance(drain)).snapshot.pods
    assert sorted(name for _, name in kept) == ["driver", "user"]


def test_pods_get_their_priority_from_the_state_classes_and_one_of_a_missing_class_is_refused(
    tmp_path: Path,
) -> None:
    """The files hold pods as written: the snapshot holds them as the API server would have stored
    them, each with its class's priority and policy (the rules and the dry run read those)."""

    def pod(name: str, priority_class: str) -> dict[str, Any]:
        claims = [{"name": "gpu", "resourceClaimName": "c"}]
        spec = {"priorityClassName": priority_class, "resourceClaims": claims, "containers": []}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "a"}, "spec": spec}

    batch = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch"},
        "value": 100,
        "preemptionPolicy": "Never",
    }
    state = [batch, pod("etl", "batch"), pod("agent", "system-node-critical")]
    (tmp_path / "objs.yaml").write_text(yaml.safe_dump_all(state))
    snapshot = FileState.load([str(tmp_path)], NOW).snapshot
    etl, agent = snapshot.pods[("a", "etl")].shape.spec, snapshot.pods[("a", "agent")].shape.spec
    assert (etl.priority, etl.preemption_policy) == (100, "Never")
    assert (agent.priority, agent.preemption_policy) == (2_000_001_000, "PreemptLowerPriority")
    assert list(snapshot.priority_classes) == ["batch"]
    (tmp_path / "more.yaml").write_text(yaml.safe_dump(pod("report", "nightly")))
    refused = 'pods "report" is forbidden: no PriorityClass with name nightly was found'
    with pytest.raises(ManifestError, match=re.escape(refused)):
        FileState.load([str(tmp_path)], NOW)
