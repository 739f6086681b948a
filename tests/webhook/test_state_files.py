"""``serve --state``: the snapshot from manifest files, defaulted like stored objects."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

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
