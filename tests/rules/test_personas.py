"""Rule personas: who may write DeviceClasses, ResourceSlices and the admin-access namespace label."""

from __future__ import annotations

from typing import Any

import pytest
from rule_fixtures import ADMIN, ALICE, admission, context

from policies.api.admission import UserInfo
from policies.config import Config
from policies.rules.engine import Context, Request, RuleUnavailable, decide
from policies.rules.personas import PersonasRule

GPU_SA = UserInfo(username="system:serviceaccount:gpu-driver:plugin", groups=["system:serviceaccounts"])
NET_SA = UserInfo(username="system:serviceaccount:net-driver:plugin", groups=["system:serviceaccounts"])
KUBELET_1 = UserInfo(username="system:node:node-1", groups=["system:nodes", "system:authenticated"])
GC = UserInfo(username="system:serviceaccount:kube-system:generic-garbage-collector")
DRIVERS = [
    {"driver": "gpu.example.com", "serviceAccounts": ["gpu-driver:plugin"], "nodes": True},
    {"driver": "net.example.com", "serviceAccounts": ["net-driver:plugin"]},
]
GPU_WRITERS = (
    "slices of driver gpu.example.com may be written by admins (groups system:masters), the driver's "
    "identities (system:serviceaccount:gpu-driver:plugin), the kubelet of the slice's node"
)


def configured(**settings: Any) -> Context:
    return context(personas={"drivers": DRIVERS, **settings})


def resource_slice(driver: str = "gpu.example.com", node: str | None = "node-1") -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}
    if node is not None:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    meta = {"name": "s"}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec}


def namespace(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": labels or {}}}


def findings(request: Request, ctx: Context | None = None) -> list[tuple[str, str]]:
    rule, ctx = PersonasRule(), ctx or configured()
    if not rule.applies(request, ctx):
        return [("n/a", "")]
    return [(f.action, f.message) for f in rule.check(request, ctx)]


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"}}


def test_device_classes_are_written_by_admins_only() -> None:
    assert findings(admission(DEVICE_CLASS, user=ADMIN)) == []
    assert findings(admission(DEVICE_CLASS)) == [
        ("deny", "user alice may not create DeviceClass gpu: only admins (groups system:masters) may")
    ]
    assert findings(admission(None, operation="DELETE", old=DEVICE_CLASS, user=GPU_SA)) == [(
        "deny", "user system:serviceaccount:gpu-driver:plugin may not delete DeviceClass gpu: "
        "only admins (groups system:masters) may",
    )]


def test_driver_identity_writes_only_its_own_driver() -> None:
    assert findings(admission(resource_slice(), user=GPU_SA)) == []
    assert findings(admission(None, operation="DELETE", old=resource_slice(), user=GPU_SA)) == []
    assert findings(admission(resource_slice(), user=NET_SA)) == [(
        "deny", "user system:serviceaccount:net-driver:plugin may not create ResourceSlice s "
        f"(driver gpu.example.com, node node-1): {GPU_WRITERS}",
    )]
    # The old object counts too: a driver cannot take over another driver's slice.
    net = resource_slice("net.example.com")
    assert findings(admission(net, operation="UPDATE", old=resource_slice(), user=NET_SA))[0][0] == "deny"


def test_node_identity_writes_only_its_own_node_and_only_if_the_driver_allows() -> None:
    assert findings(admission(resource_slice(), user=KUBELET_1)) == []
    assert findings(admission(resource_slice(node="node-2"), user=KUBELET_1)) == [(
        "deny",
        "user system:node:node-1 may not create ResourceSlice s (driver gpu.example.com, node node-2): "
        + GPU_WRITERS,
    )]
    assert findings(admission(resource_slice(node=None), user=KUBELET_1))[0][0] == "deny"
    net = resource_slice("net.example.com")
    assert findings(admission(net, user=KUBELET_1)) == [(
        "deny",
        "user system:node:node-1 may not create ResourceSlice s (driver net.example.com, node node-1): "
        "slices of driver net.example.com may be written by admins (groups system:masters), the driver's "
        "identities (system:serviceaccount:net-driver:plugin)",
    )]
    # The kubelet wipes its node's slices of every driver when it starts: deleting is always allowed.
    assert findings(admission(None, operation="DELETE", old=net, user=KUBELET_1)) == []
    impostor = UserInfo(username="system:node:node-1", groups=["system:authenticated"])
    assert findings(admission(resource_slice(), user=impostor))[0][0] == "deny"


def test_unknown_driver_is_admins_only_and_cleaners_may_delete() -> None:
    tpu = resource_slice("tpu.example.com")
    assert findings(admission(tpu, user=GPU_SA)) == [(
        "deny", "user system:serviceaccount:gpu-driver:plugin may not create ResourceSlice s "
        "(driver tpu.example.com, node node-1): driver tpu.example.com is not in rules.personas.drivers, "
        "so only admins (groups system:masters) may write its slices",
    )]
    assert findings(admission(None, operation="DELETE", old=tpu, user=GC)) == []
    assert findings(admission(tpu, user=GC))[0][0] == "deny"


def test_admin_access_label_is_changed_by_admins_only() -> None:
    labelled = namespace({"resource.kubernetes.io/admin-access": "true"})
    message = (
        "user alice may not {verb} Namespace team-a with a changed resource.kubernetes.io/admin-access "
        "label: only admins (groups system:masters) may change it, because admin access to devices "
        "bypasses device isolation (claims in that namespace can use devices allocated to others)"
    )
    assert findings(admission(labelled)) == [("deny", message.format(verb="create"))]
    assert findings(admission(namespace(), operation="UPDATE", old=labelled)) == [
        ("deny", message.format(verb="update"))
    ]
    assert findings(admission(labelled, user=ADMIN)) == []
    # Other label changes, and namespaces without the label, are not this rule's business.
    relabelled = namespace({"resource.kubernetes.io/admin-access": "true", "team": "ml"})
    assert findings(admission(relabelled, operation="UPDATE", old=labelled)) == [("n/a", "")]
    assert findings(admission(namespace())) == [("n/a", "")]


def test_default_mode_only_warns() -> None:
    decision = decide(admission(DEVICE_CLASS), [PersonasRule()], context())
    assert decision.allowed
    assert decision.warnings == (
        "user alice may not create DeviceClass gpu: only admins (groups system:masters) may",
    )
    enforced = decide(admission(DEVICE_CLASS), [PersonasRule()], context(personas={"mode": "enforce"}))
    assert not enforced.allowed


def test_bad_input() -> None:
    anonymous = admission(DEVICE_CLASS, user=UserInfo())
    assert findings(anonymous) == [
        ("deny", "user (anonymous) may not create DeviceClass gpu: only admins (groups system:masters) may")
    ]
    undecoded = Request(
        uid="1", operation="CREATE", group="resource.k8s.io", version="v1", kind="ResourceSlice",
        resource="resourceslices", sub_resource="", namespace="", name="s", user=ALICE, raw={"spec": 3},
    )
    with pytest.raises(RuleUnavailable, match="ResourceSlice s: the object could not be decoded"):
        PersonasRule().check(undecoded, configured())
    wrong = {"driver": "d", "serviceAccounts": ["plugin"]}
    field = r"(?s)rules\.personas\.drivers\.0\.serviceAccounts.*<namespace>:<name>"
    with pytest.raises(ValueError, match=field):
        Config.model_validate({"rules": {"personas": {"drivers": [wrong]}}})
