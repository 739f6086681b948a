"""``draguard allocate -o json`` against what the upstream 1.36 allocator would return for the same input.

A second pair of eyes on the port: every scenario here is one the ported upstream table
(tests/allocator/cases) does not cover, run end to end through the CLI the way an outside
comparison would run it (``draguard allocate -f FILES -o json``). The expected JSON is derived
by reading upstream 1.36, not by running draguard: each test says which upstream function decides
the answer (paths under ``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/
incubating/`` unless stated) and dra-reference section.

Upstream results are Go structs marshalled with encoding/json: ``omitempty`` fields that are nil or
empty are left out, ``resource.Quantity`` prints its canonical String(), map keys come out sorted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli import main

V1 = "resource.k8s.io/v1"
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# --- builders ------------------------------------------------------------------------------------------


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def device_class(name: str, driver: str, **spec: Any) -> dict[str, Any]:
    body = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}], **spec}
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": name}, "spec": body}


def resource_slice(name: str, driver: str, pool_name: str, devices: list[Any], **spec: Any) -> dict[str, Any]:
    """A slice of a one-slice pool (generation 1) unless ``spec`` overrides ``pool``."""
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool_name, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": d} if isinstance(d, str) else d for d in devices],
        **spec,
    }
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def claim(name: str, *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }


def request(name: str, class_name: str, count: int = 1, **exactly: Any) -> dict[str, Any]:
    """A request as a user writes it (mode/count defaulted by the API server, i.e. by the CLI)."""
    body: dict[str, Any] = {"deviceClassName": class_name, **exactly}
    if count != 1:
        body["count"] = count
    return {"name": name, "exactly": body}


def allocated(
    claim_obj: dict[str, Any], *results: dict[str, Any], node_name: str | None = None
) -> dict[str, Any]:
    """``claim_obj`` with a status.allocation holding ``results``."""
    allocation: dict[str, Any] = {"devices": {"results": list(results)}}
    if node_name:
        allocation["nodeSelector"] = pinned(node_name)
    return {**claim_obj, "status": {"allocation": allocation}}


def pinned(node_name: str) -> dict[str, Any]:
    """The result node selector of a node-local allocation (createNodeSelector, 4.15)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    return {"nodeSelectorTerms": [term]}


def result(req: str, driver: str, pool: str, device: str, **extra: Any) -> dict[str, Any]:
    return {"request": req, "driver": driver, "pool": pool, "device": device, **extra}


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], docs: list[dict[str, Any]], *args: str) -> Any:
    """``draguard allocate -f <docs> -o json [args]``: the answer for the one pod asked about (the
    pod of the input, or the unallocated claims as one pod), key order kept."""
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    code = main(["allocate", "-f", str(path), "-o", "json", *args])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    (pod,) = json.loads(out)["pods"]
    return pod


def only(document: Any) -> dict[str, Any]:
    """The single node entry of a one-node run."""
    (entry,) = document["nodes"]
    assert isinstance(entry, dict)
    return entry


GPU = "gpu.example.com"
NIC = "nic.example.com"


# --- result JSON form ----------------------------------------------------------------------------------


def shared_gpu_cluster() -> list[dict[str, Any]]:
    """node-1 with one multi-allocatable, tainted GPU whose capacities have range policies."""
    gpu = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {
            "memory": {
                "value": "80Gi",
                "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
            },
            "bandwidth": {"value": "100G", "requestPolicy": {"validRange": {"min": "10G", "step": "10G"}}},
        },
        "taints": [{"key": "maintenance", "value": "planned", "effect": "NoSchedule"}],
    }
    return [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("node-1-gpus", GPU, "node-1", [gpu], nodeName="node-1"),
    ]


def shared_gpu_claim() -> dict[str, Any]:
    toleration = {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}
    return claim(
        "share",
        request(
            "gpu",
            "gpu",
            tolerations=[toleration],
            capacity={"requests": {"memory": "1024Mi", "bandwidth": "45G"}},
        ),
    )


def test_share_of_a_multi_allocatable_device_prints_like_the_go_struct(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # allocateDevice: multi device -> GetConsumedCapacityFromRequest for every capacity, a new
    # shareID (uuid.NewUUID().String(): lowercase); the result copies the request's tolerations
    # after API defaulting (operator Equal, dra-reference 1.9); adminAccess is only set when true,
    # binding conditions only when the device has some. consumable_capacity.go rounds 45G up to the
    # next 10G step (50G) and the arithmetic leaves a binary-format Quantity, which String()s as
    # 48828125Ki (4.16a); 1024Mi is within range and on a step, its canonical form is 1Gi.
    # createNodeSelector: the slice has nodeName -> metadata.name In [node-1].
    entry = only(run(tmp_path, capsys, [*shared_gpu_cluster(), shared_gpu_claim()]))
    assert entry["fits"] is True and entry.get("error") is None
    (allocation,) = entry["results"]
    (device,) = allocation["devices"]["results"]
    share_id = device.pop("shareID")
    assert UUID_RE.match(share_id), share_id
    assert device == result(
        "gpu",
        GPU,
        "node-1",
        "gpu-0",
        tolerations=[{"key": "maintenance", "operator": "Equal", "value": "planned", "effect": "NoSchedule"}],
        consumedCapacity={"bandwidth": "48828125Ki", "memory": "1Gi"},
    )
    assert allocation == {"devices": {"results": [device]}, "nodeSelector": pinned("node-1")}


def test_consumed_capacity_keys_are_sorted_like_a_marshalled_go_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # encoding/json writes map keys in sorted order; consumedCapacity is a
    # map[QualifiedName]Quantity, so "bandwidth" precedes "memory" whatever the slice's order.
    entry = only(run(tmp_path, capsys, [*shared_gpu_cluster(), shared_gpu_claim()]))
    consumed = entry["results"][0]["devices"]["results"][0]["consumedCapacity"]
    assert list(consumed) == sorted(consumed)


def test_empty_lists_and_strings_are_left_out_as_go_omitempty_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # DeviceRequestAllocationResult.Tolerations is `json:"tolerations,omitempty"`: the allocator
    # copies the request's (empty, non-nil) list and encoding/json drops it. Inside a toleration
    # key/value/effect are omitempty strings too, so value "" is not printed.
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0", "gpu-1"], nodeName="node-1"),
        claim(
            "c",
            request("none", "gpu", tolerations=[]),
            request("empty-value", "gpu", tolerations=[{"key": "k", "operator": "Exists", "value": ""}]),
        ),
    ]
    entry = only(run(tmp_path, capsys, docs))
    first, second = entry["results"][0]["devices"]["results"]
    assert first == result("none", GPU, "node-1", "gpu-0")
    assert second == result(
        "empty-value", GPU, "node-1", "gpu-1", tolerations=[{"key": "k", "operator": "Exists"}]
    )


def test_claim_without_requests_gets_an_empty_devices_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Allocate: Devices.Results = make([]..., 0) for a claim with no requests; results and config
    # are omitempty and createNodeSelector returns nil (empty term), so the JSON is {"devices": {}}.
    docs = [node("node-1"), device_class("gpu", GPU), claim("nothing")]
    entry = only(run(tmp_path, capsys, docs))
    assert entry["fits"] is True
    assert entry["results"] == [{"devices": {}}]


def test_admin_access_result_only_when_true(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # allocateOne: an adminAccess request skips the "in use" check, so it gets gpu-0 although
    # another claim holds it; allocateDevice sets result.adminAccess = ptr.To(true) only for admin
    # requests. adminAccess: false (set, as the API allows) is not copied to the result.
    holder = allocated(
        claim("holder", request("gpu", "gpu")), result("gpu", GPU, "node-1", "gpu-0"), node_name="node-1"
    )
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0", "gpu-1"], nodeName="node-1"),
        holder,
        claim("admin", request("watch", "gpu", adminAccess=True)),
        claim("user", request("use", "gpu", adminAccess=False)),
    ]
    entry = only(run(tmp_path, capsys, docs))
    admin, user = entry["results"]
    assert admin["devices"]["results"] == [result("watch", GPU, "node-1", "gpu-0", adminAccess=True)]
    assert user["devices"]["results"] == [result("use", GPU, "node-1", "gpu-1")]


def binding_docs() -> list[dict[str, Any]]:
    gpu = {
        "name": "gpu-0",
        "bindsToNode": True,
        "bindingConditions": ["attached"],
        "bindingFailureConditions": ["attach-failed"],
    }
    return [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("fabric", GPU, "fabric", [gpu], allNodes=True),
        claim("c", request("gpu", "gpu")),
    ]


def test_binding_conditions_copied_and_binds_to_node_pins_the_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Allocate: with DeviceBindingAndStatus the result copies both condition lists;
    # createNodeSelector: bindsToNode pins the result to the node although the slice is allNodes.
    entry = only(run(tmp_path, capsys, binding_docs()))
    (allocation,) = entry["results"]
    assert allocation == {
        "devices": {
            "results": [
                result(
                    "gpu",
                    GPU,
                    "fabric",
                    "gpu-0",
                    bindingConditions=["attached"],
                    bindingFailureConditions=["attach-failed"],
                )
            ]
        },
        "nodeSelector": pinned("node-1"),
    }


def test_device_with_binding_conditions_is_invisible_without_the_feature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # isSelectable: DeviceBindingAndStatus off and len(device.BindingConditions) > 0 -> not
    # selectable; that is "does not fit", not an error.
    features = "adminAccess,prioritizedList,partitionableDevices,deviceTaints,consumableCapacity"
    entry = only(run(tmp_path, capsys, binding_docs(), "--features", features))
    assert entry["fits"] is False and entry.get("error") is None
    assert entry["results"] == [None]


def test_node_selectors_of_selector_slices_merge_into_one_term(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # createNodeSelector: no device is node-local, so the one-term selectors of both slices are
    # merged into one term (requirements in the order met; the exact duplicate of region is
    # skipped by containsNodeSelectorRequirement, which compares values as sets); allNodes adds
    # nothing. Pools are searched in (driver, pool) order: rack-a before rack-b before shared.
    region = {"key": "region", "operator": "In", "values": ["r1", "r2"]}
    region_again = {"key": "region", "operator": "In", "values": ["r2", "r1"]}
    rack = {"key": "rack", "operator": "Exists"}
    docs = [
        node("node-1", region="r1", rack="7"),
        device_class("gpu", GPU),
        resource_slice(
            "b",
            GPU,
            "rack-b",
            ["b-0"],
            nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [region_again, rack]}]},
        ),
        resource_slice(
            "a", GPU, "rack-a", ["a-0"], nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [region]}]}
        ),
        resource_slice("all", GPU, "shared", ["s-0"], allNodes=True),
        claim("c", request("gpu", "gpu", count=3)),
    ]
    entry = only(run(tmp_path, capsys, docs))
    (three,) = entry["results"]
    assert [r["device"] for r in three["devices"]["results"]] == ["a-0", "b-0", "s-0"]
    assert three["nodeSelector"] == {"nodeSelectorTerms": [{"matchExpressions": [region, rack]}]}


def test_all_nodes_devices_give_no_node_selector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # createNodeSelector: allNodes contributes nothing, the empty term becomes a nil selector,
    # which `nodeSelector,omitempty` leaves out.
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("all", GPU, "shared", ["s-0"], allNodes=True),
        claim("c", request("gpu", "gpu")),
    ]
    entry = only(run(tmp_path, capsys, docs))
    assert entry["results"] == [{"devices": {"results": [result("gpu", GPU, "shared", "s-0")]}}]


def opaque(driver: str, **parameters: Any) -> dict[str, Any]:
    return {"driver": driver, "parameters": parameters}


def test_config_class_entries_first_then_claim_entries_repeated_per_named_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Allocate, "Populate configs" (1.36, dra-reference 4.16): each class contributes its config
    # once with the names of every request using it; then claim configs in claim order: a config
    # without requests is copied as is, a config naming requests is appended once per top-level
    # request it names (the 1.36 duplicate quirk; 1.37's "all requests -> nil" rewrite is not in 1.36).
    docs = [
        node("node-1"),
        device_class("gpu", GPU, config=[{"opaque": opaque(GPU, mode="fast")}]),
        device_class("nic", NIC),
        resource_slice("gpus", GPU, "node-1", ["gpu-0", "gpu-1"], nodeName="node-1"),
        resource_slice("nics", NIC, "node-1", ["nic-0"], nodeName="node-1"),
        claim(
            "c",
            request("a", "gpu"),
            request("net", "nic"),
            request("b", "gpu"),
            config=[
                {"requests": ["a", "net"], "opaque": opaque(GPU, shared=True)},
                {"opaque": opaque(NIC, mtu=9000)},
            ],
        ),
    ]
    entry = only(run(tmp_path, capsys, docs))
    config = entry["results"][0]["devices"]["config"]
    both = {"source": "FromClaim", "requests": ["a", "net"], "opaque": opaque(GPU, shared=True)}
    assert config == [
        {"source": "FromClass", "requests": ["a", "b"], "opaque": opaque(GPU, mode="fast")},
        both,
        both,
        {"source": "FromClaim", "opaque": opaque(NIC, mtu=9000)},
    ]


# --- DeviceTaintRules (overlaid by the scheduler's ResourceSlice tracker, dra-reference 1.4) ------------


def taint_rule(name: str, selector: dict[str, Any] | None, effect: str = "NoSchedule") -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "rule", "value": name, "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": spec,
    }


# DeviceTaintRule is served only where the cluster turns it on (v1beta2, the DRADeviceTaintRules gate):
# the input says so with the API server's own --runtime-config entry.
TAINT_RULES_SERVED = ("--api-versions", "resource.k8s.io/v1beta2/devicetaintrules=true")


def taint_docs(*rules: dict[str, Any], **exactly: Any) -> list[dict[str, Any]]:
    return [
        node("node-1"),
        device_class("gpu", GPU),
        device_class("nic", NIC),
        resource_slice("gpus", GPU, "node-1", ["dev-0", "dev-1"], nodeName="node-1"),
        resource_slice("nics", NIC, "node-1", ["dev-0"], nodeName="node-1"),
        *rules,
        claim("c", request("gpu", "gpu", **exactly), request("nic", "nic")),
    ]


def picked(entry: dict[str, Any]) -> list[str] | None:
    """``driver/pool/device`` of every result of the only claim, or None if it did not fit."""
    (allocation,) = entry["results"]
    if allocation is None:
        return None
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in allocation["devices"]["results"]]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        # driver + device name: only the GPU dev-0, the NIC dev-0 of the other driver stays clean.
        ({"driver": GPU, "device": "dev-0"}, [f"{GPU}/node-1/dev-1", f"{NIC}/node-1/dev-0"]),
        # device name alone: both drivers' dev-0 -> the NIC request cannot be served.
        ({"device": "dev-0"}, None),
        # pool of another name: nothing tainted.
        ({"pool": "node-2"}, [f"{GPU}/node-1/dev-0", f"{NIC}/node-1/dev-0"]),
        # the empty selector matches every device.
        ({}, None),
        # no selector at all matches no device (DeviceTaintSelector docs: "Without a selector, no
        # devices are matched").
        (None, [f"{GPU}/node-1/dev-0", f"{NIC}/node-1/dev-0"]),
    ],
)
def test_device_taint_rule_selectors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    selector: dict[str, Any] | None,
    expected: list[str] | None,
) -> None:
    # The scheduler's resourceslice tracker appends the rule's taint to every device the selector
    # matches (driver, pool, device compared as exact strings, unset = any); allocateDevice then
    # refuses untolerated NoSchedule/NoExecute taints (taintPreventsAllocation).
    entry = only(run(tmp_path, capsys, taint_docs(taint_rule("r", selector)), *TAINT_RULES_SERVED))
    assert picked(entry) == expected
    assert entry.get("error") is None


def test_device_taint_rule_with_effect_none_does_not_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # taintPreventsAllocation: only NoSchedule and NoExecute prevent allocation.
    entry = only(run(tmp_path, capsys, taint_docs(taint_rule("r", {}, effect="None")), *TAINT_RULES_SERVED))
    assert picked(entry) == [f"{GPU}/node-1/dev-0", f"{NIC}/node-1/dev-0"]


def test_device_taint_rule_taint_is_tolerated_and_toleration_copied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A GPU request tolerating key "rule" (Exists) gets the tainted dev-0; its result carries the
    # toleration verbatim. The NIC request does not tolerate and the rule only selects the GPU driver.
    toleration = {"key": "rule", "operator": "Exists", "effect": "NoSchedule"}
    docs = taint_docs(taint_rule("r", {"driver": GPU}), tolerations=[toleration])
    entry = only(run(tmp_path, capsys, docs, *TAINT_RULES_SERVED))
    gpu, nic = entry["results"][0]["devices"]["results"]
    assert gpu == result("gpu", GPU, "node-1", "dev-0", tolerations=[toleration])
    assert nic == result("nic", NIC, "node-1", "dev-0")


# --- allocated state (what the scheduler hands the allocator, dra-reference 4.2) -------------------------


def test_admin_access_allocations_do_not_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # foreachAllocatedDevice (scheduler plugin, allocateddevices.go) skips results with
    # adminAccess: true, so gpu-0 is free for a normal request.
    holder = allocated(
        claim("monitor", request("watch", "gpu", adminAccess=True)),
        result("watch", GPU, "node-1", "gpu-0", adminAccess=True),
        node_name="node-1",
    )
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0"], nodeName="node-1"),
        holder,
        claim("c", request("gpu", "gpu")),
    ]
    assert picked(only(run(tmp_path, capsys, docs))) == [f"{GPU}/node-1/gpu-0"]


SHARE_A = "11111111-1111-4111-8111-111111111111"
SHARE_B = "22222222-2222-4222-8222-222222222222"


def share_docs(wanted: str | None) -> list[dict[str, Any]]:
    """A multi-allocatable 80Gi GPU already shared twice (30Gi + 20Gi) and a claim for ``wanted``."""
    gpu = {"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "80Gi"}}}
    holders = [
        allocated(
            claim(name, request("gpu", "gpu")),
            result("gpu", GPU, "node-1", "gpu-0", shareID=share, consumedCapacity={"memory": amount}),
            node_name="node-1",
        )
        for name, share, amount in (("one", SHARE_A, "30Gi"), ("two", SHARE_B, "20Gi"))
    ]
    extra = {"capacity": {"requests": {"memory": wanted}}} if wanted else {}
    return [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", [gpu], nodeName="node-1"),
        *holders,
        claim("c", request("gpu", "gpu", **extra)),
    ]


@pytest.mark.parametrize(("wanted", "fits"), [("30Gi", True), ("30721Mi", False), (None, False)])
def test_shares_in_use_add_up_their_consumed_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wanted: str | None, fits: bool
) -> None:
    # Scheduler (consumable capacity on): results with a shareID go to AllocatedSharedDeviceIDs and
    # their consumedCapacity is summed into AggregatedCapacity (50Gi). CmpRequestOverCapacity:
    # 50Gi + request <= 80Gi. Without a capacity request a policy-free capacity is consumed whole.
    entry = only(run(tmp_path, capsys, share_docs(wanted)))
    assert entry["fits"] is fits and entry.get("error") is None
    if fits:
        (device,) = entry["results"][0]["devices"]["results"]
        assert device["consumedCapacity"] == {"memory": "30Gi"}
        assert UUID_RE.match(device["shareID"])


def test_shares_are_exclusive_allocations_without_consumable_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # foreachAllocatedDevice only treats shareID results as shares when DRAConsumableCapacity is
    # on; otherwise the device goes to AllocatedDevices, and allocateDevice ignores
    # allowMultipleAllocations with the feature off: gpu-0 is simply in use.
    features = "adminAccess,prioritizedList,partitionableDevices,deviceTaints,deviceBindingAndStatus"
    entry = only(run(tmp_path, capsys, share_docs(None), "--features", features))
    assert entry["fits"] is False and entry.get("error") is None


# --- the dry-run layer (scheduler PreFilter/Filter around the allocator, dra-reference 4.18) -------------


def pod(name: str, *claims: dict[str, Any], statuses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": "0a0a0a0a-0000-4000-8000-000000000001"},
        "spec": {"containers": [{"name": "app", "image": "app"}], "resourceClaims": list(claims)},
    }
    if statuses is not None:
        body["status"] = {"resourceClaimStatuses": statuses}
    return body


def template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def pod_docs() -> list[dict[str, Any]]:
    """node-2 before node-1; the pod uses a claim already allocated on node-2 plus a template."""
    existing = allocated(
        claim("shared", request("gpu", "gpu")), result("gpu", GPU, "node-2", "gpu-0"), node_name="node-2"
    )
    return [
        node("node-2"),
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("n1", GPU, "node-1", ["gpu-0"], nodeName="node-1"),
        resource_slice("n2", GPU, "node-2", ["gpu-0", "gpu-1"], nodeName="node-2"),
        existing,
        template("one-gpu", request("gpu", "gpu")),
        claim("unrelated", request("gpu", "gpu", count=2)),
        pod(
            "app",
            {"name": "mine", "resourceClaimTemplateName": "one-gpu"},
            {"name": "data", "resourceClaimName": "shared"},
        ),
    ]


def test_pod_claims_in_pod_order_nodes_in_input_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # PreFilter: the pod's claims in spec.resourceClaims order, the template instantiated; Filter per
    # node: the allocated claim's nodeSelector must match (node-1 fails, not an error), the rest goes
    # through the allocator, which sees node-2/gpu-0 as in use. The claim "unrelated" is not the
    # pod's and is not allocated here.
    doc = run(tmp_path, capsys, pod_docs())
    on_node2, on_node1 = doc["nodes"]
    assert on_node2["node"] == "node-2" and on_node1["node"] == "node-1"
    assert on_node1["fits"] is False and on_node1.get("error") is None
    assert on_node1["results"] == [None, None]
    assert on_node2["fits"] is True and on_node2.get("error") is None
    mine, data = on_node2["results"]
    assert mine == {
        "devices": {"results": [result("gpu", GPU, "node-2", "gpu-1")]},
        "nodeSelector": pinned("node-2"),
    }
    assert data == {
        "devices": {"results": [result("gpu", GPU, "node-2", "gpu-0")]},
        "nodeSelector": pinned("node-2"),
    }


def test_without_pod_unallocated_claims_in_file_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue text: the claims to allocate are the unallocated ResourceClaims in file order; the
    # allocator walks them in that order, so "second" (first in the file) gets gpu-0.
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0", "gpu-1"], nodeName="node-1"),
        claim("second", request("gpu", "gpu")),
        allocated(claim("done", request("gpu", "gpu")), result("gpu", GPU, "node-1", "gpu-9")),
        claim("first", request("gpu", "gpu")),
    ]
    entry = only(run(tmp_path, capsys, docs))
    assert [r["devices"]["results"][0]["device"] for r in entry["results"]] == ["gpu-0", "gpu-1"]


def test_unknown_class_refuses_the_pod_before_any_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The scheduler's DynamicResources PreFilter (validateDeviceClass) checks every class before the
    # allocator runs: "request gpu: device class no-such-class does not exist" for every node, the
    # allocator's own "could not retrieve device class" is never reached. PostFilter then finds no
    # claims in its cycle state.
    docs = [
        node("node-1"),
        node("node-2"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0"], nodeName="node-1"),
        claim("c", request("gpu", "no-such-class")),
    ]
    doc = run(tmp_path, capsys, docs)
    for entry in doc["nodes"]:
        assert entry["fits"] is False and entry["results"] == [None]
        assert entry["reasons"] == ["request gpu: device class no-such-class does not exist"]
    assert doc["message"] == (
        "0/2 nodes are available: request gpu: device class no-such-class does not exist. no new claims to "
        "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_requested_amounts_taken_as_is_still_print_canonically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GetConsumedCapacityFromRequest: without a request policy the consumed amount is the requested
    # Quantity itself (DeepCopy). Go never keeps the text a Quantity was parsed from: MarshalJSON
    # writes String(), the canonical form, so "1024Mi" prints "1Gi" and "1000m" prints "1".
    gpu = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "80Gi"}, "lanes": {"value": "4"}},
    }
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", [gpu], nodeName="node-1"),
        claim("c", request("gpu", "gpu", capacity={"requests": {"memory": "1024Mi", "lanes": "1000m"}})),
    ]
    entry = only(run(tmp_path, capsys, docs))
    (device,) = entry["results"][0]["devices"]["results"]
    assert device["consumedCapacity"] == {"lanes": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        ({"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}, False),  # effect differs
        ({"key": "maintenance", "operator": "Equal", "value": "planned", "effect": "NoExecute"}, True),
        ({"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}, True),
    ],
)
def test_toleration_matching_follows_resourceclaim_tolerates_taint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toleration: dict[str, Any], tolerated: bool
) -> None:
    # resourceclaim.ToleratesTaint: effect must be empty or equal, key empty or equal, Exists
    # matches any value, Equal compares values; tolerationSeconds plays no part in allocation.
    gpu = {"name": "gpu-0", "taints": [{"key": "maintenance", "value": "planned", "effect": "NoExecute"}]}
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", [gpu], nodeName="node-1"),
        claim("c", request("gpu", "gpu", tolerations=[toleration])),
    ]
    entry = only(run(tmp_path, capsys, docs))
    assert entry["fits"] is tolerated and entry.get("error") is None


def test_multi_term_slice_node_selector_is_an_error_after_the_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GatherPools accepts the slice (nodeaffinity ORs the terms, the second matches node-1); the
    # search picks its device; createNodeSelector then refuses a selector with 2 terms and Allocate
    # returns "create NodeSelector for claim c: unsupported ResourceSlice.NodeSelector with 2 terms".
    terms = [
        {"matchExpressions": [{"key": "region", "operator": "In", "values": ["r9"]}]},
        {"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]},
    ]
    docs = [
        node("node-1", region="r1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "shared", ["gpu-0"], nodeSelector={"nodeSelectorTerms": terms}),
        claim("c", request("gpu", "gpu")),
    ]
    entry = only(run(tmp_path, capsys, docs))
    assert entry["fits"] is False and entry["results"] == [None]
    assert (
        "create NodeSelector for claim c: unsupported ResourceSlice.NodeSelector with 2 terms"
        in entry.get("error")
    )


def test_selector_runtime_error_only_on_nodes_where_the_search_reaches_a_bad_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # isSelectable evaluates the class selector lazily, device by device in search order, and a
    # CEL runtime error (missing attribute key) aborts Allocate. node-1's first device satisfies
    # the claim before the attribute-less one is looked at; node-2 only has the attribute-less one.
    model = {"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}
    docs = [
        node("node-1"),
        node("node-2"),
        {
            "apiVersion": V1,
            "kind": "DeviceClass",
            "metadata": {"name": "a100"},
            "spec": {"selectors": [{"cel": {"expression": f'device.attributes["{GPU}"].model == "a100"'}}]},
        },
        resource_slice("n1", GPU, "node-1", [model, "gpu-1"], nodeName="node-1"),
        resource_slice("n2", GPU, "node-2", ["gpu-0"], nodeName="node-2"),
        claim("c", request("gpu", "a100")),
    ]
    answer = run(tmp_path, capsys, docs)
    on_node1, on_node2 = answer["nodes"]
    assert on_node2["fits"] is False and on_node2["results"] == [None]
    assert "class a100: selector #0" in on_node2.get("error") and "CEL runtime error" in on_node2.get("error")
    # The error aborts the scheduler's whole attempt (findNodesThatPassFilters): node-1 is not
    # chosen although it fits, and the pod's condition says SchedulerError.
    assert on_node1["fits"] is False
    assert on_node1["error"].startswith("the scheduling attempt was aborted by node node-2: ")
    assert answer["reason"] == "SchedulerError"
    assert answer["message"] == f'running "DynamicResources" filter plugin: {on_node2["error"]}'


# --- request validation before the search (validateDeviceRequest, dra-reference 4.5) ---------------------


def sub(name: str, class_name: str, count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "deviceClassName": class_name, **({"count": count} if count != 1 else {}), **extra}


def validation_docs(*requests: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0", "gpu-1"], nodeName="node-1"),
        claim("c", *requests),
    ]


def test_every_alternative_is_validated_before_searching(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The scheduler's PreFilter checks the class of each subrequest up front (validateDeviceClass with
    # the qualified name "gpu/fallback"), so a missing class in the second alternative refuses the pod
    # although the first would fit.
    docs = validation_docs({"name": "gpu", "firstAvailable": [sub("big", "gpu"), sub("fallback", "missing")]})
    entry = only(run(tmp_path, capsys, docs))
    assert entry["fits"] is False
    assert entry["reasons"] == ["request gpu/fallback: device class missing does not exist"]


def test_admin_access_false_is_still_refused_without_the_feature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # validateDeviceRequest: hasAdminAccess() is "field set", so adminAccess: false with the
    # AdminAccess feature off is the error "admin access is requested, but the feature is disabled".
    docs = validation_docs(request("gpu", "gpu", adminAccess=False))
    entry = only(run(tmp_path, capsys, docs, "--features", "prioritizedList,deviceTaints"))
    assert (
        "claim default/c, request gpu: admin access is requested, but the feature is disabled"
        in entry.get("error")
    )


def test_claim_limit_counts_the_smallest_alternative(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # minDevicesPerClaim adds, for a firstAvailable request, the minimum over its subrequests:
    # 20 + min(20, 1) = 21 <= 32 passes validation (and then does not fit: no error); 20 + 13 = 33
    # is the error "number of requested devices 33 exceeds the claim limit of 32".
    fits = validation_docs(
        request("many", "gpu", count=20),
        {"name": "alt", "firstAvailable": [sub("a", "gpu", 20), sub("b", "gpu")]},
    )
    entry = only(run(tmp_path, capsys, fits))
    assert entry["fits"] is False and entry.get("error") is None
    too_many = validation_docs(
        request("many", "gpu", count=20),
        {"name": "alt", "firstAvailable": [sub("a", "gpu", 20), sub("b", "gpu", 13)]},
    )
    entry = only(run(tmp_path, capsys, too_many))
    assert "claim default/c: number of requested devices 33 exceeds the claim limit of 32" in entry["error"]


def test_objects_sharing_a_name_the_later_one_wins_as_in_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The upstream allocator takes slices and claims as lists and never keys them by name, but a
    # cluster holds one object of a kind, namespace and name: kubectl apply of both leaves the
    # later one. allocate answers for that cluster and says which document replaced which (allocating
    # from both once answered with a confusing "pool is incomplete").
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("slice-1", GPU, "pool-a", ["gpu-a"], nodeName="node-1"),
        resource_slice("slice-1", GPU, "pool-b", ["gpu-b"], nodeName="node-1"),
        claim("claim-0", request("gpu", "gpu", count=2)),
        claim("claim-0", request("gpu", "gpu")),
    ]
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    assert main(["allocate", "-f", str(path), "-o", "json"]) == 0
    out, err = capsys.readouterr()
    assert [line for line in err.splitlines() if "replaces" in line] == [
        f"note: {path}: document 4: ResourceSlice slice-1 replaces the one in {path}: document 3 "
        "(the later document wins, as with kubectl apply)",
        f"note: {path}: document 6: ResourceClaim default/claim-0 replaces the one in {path}: document 5 "
        "(the later document wins, as with kubectl apply)",
    ]
    (pod,) = json.loads(out)["pods"]
    assert pod["claims"] == ["default/claim-0"]
    assert [r["device"] for r in only(pod)["results"][0]["devices"]["results"]] == ["gpu-b"]


def test_binds_to_node_pins_the_result_even_without_the_binding_feature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # createNodeSelector reads device.BindsToNode unconditionally; only devices with binding
    # conditions depend on DeviceBindingAndStatus (isSelectable). A bindsToNode device without
    # conditions is therefore usable with the feature off and still pins the result to the node.
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("fabric", GPU, "fabric", [{"name": "gpu-0", "bindsToNode": True}], allNodes=True),
        claim("c", request("gpu", "gpu")),
    ]
    features = "adminAccess,prioritizedList,partitionableDevices,deviceTaints,consumableCapacity"
    entry = only(run(tmp_path, capsys, docs, "--features", features))
    assert entry["results"] == [
        {"devices": {"results": [result("gpu", GPU, "fabric", "gpu-0")]}, "nodeSelector": pinned("node-1")}
    ]


def test_objects_without_namespace_live_in_default_like_kubectl_puts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Applied with kubectl, a claim or template without metadata.namespace lands in "default", where
    # the pod (namespace default) finds it; the scheduler then allocates it like any pod claim.
    # (draguard validate already checks namespace-less claims as in "default", commit 69c2d27.)
    bare_claim = claim("data", request("gpu", "gpu"))
    del bare_claim["metadata"]["namespace"]
    bare_template = template("one-gpu", request("gpu", "gpu"))
    del bare_template["metadata"]["namespace"]
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0", "gpu-1"], nodeName="node-1"),
        bare_claim,
        bare_template,
        pod(
            "app",
            {"name": "mine", "resourceClaimTemplateName": "one-gpu"},
            {"name": "data", "resourceClaimName": "data"},
        ),
    ]
    entry = only(run(tmp_path, capsys, docs))
    assert entry["fits"] is True
    assert [r["devices"]["results"][0]["device"] for r in entry["results"]] == ["gpu-0", "gpu-1"]


def test_taints_ignored_without_the_feature_but_tolerations_still_copied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # allocateDevice checks taints only with DeviceTaints on; Allocate copies the request's
    # tolerations into the result unconditionally (lookupRequest(claim).tolerations()).
    gpu = {"name": "gpu-0", "taints": [{"key": "broken", "effect": "NoExecute"}]}
    toleration = {"key": "other", "operator": "Exists"}
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", [gpu], nodeName="node-1"),
        claim("c", request("gpu", "gpu", tolerations=[toleration])),
    ]
    features = "adminAccess,prioritizedList,partitionableDevices,deviceBindingAndStatus,consumableCapacity"
    entry = only(run(tmp_path, capsys, docs, "--features", features))
    assert entry["results"][0]["devices"]["results"] == [
        result("gpu", GPU, "node-1", "gpu-0", tolerations=[toleration])
    ]
    with_taints = only(run(tmp_path, capsys, docs))
    assert with_taints["fits"] is False and with_taints.get("error") is None


@pytest.mark.parametrize(
    ("wanted", "printed"),
    [
        ("45G", "48828125Ki"),  # rounded up to 50G (dra-reference 4.16a)
        ("20G", "19531250Ki"),  # already on a step: still recomputed as min + n*step in BinarySI
        ("10G", "9765625Ki"),  # equal to min: n = 0, same path
        ("5G", "10G"),  # below min: Min.DeepCopy(), Min's own (decimal) format
    ],
)
def test_range_policy_results_print_as_upstream_formats_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wanted: str, printed: str
) -> None:
    # roundUpRange (consumable_capacity.go, 1.36): below min -> a copy of min; otherwise with a
    # step -> NewQuantity(min + step*ceil((req-min)/step), BinarySI), whether or not the request was
    # already on a step; Go prints a BinarySI quantity that is not a power-of-1024 multiple of a
    # larger suffix in Ki (50G = 48828125Ki).
    gpu = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {
            "bandwidth": {"value": "100G", "requestPolicy": {"validRange": {"min": "10G", "step": "10G"}}}
        },
    }
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", [gpu], nodeName="node-1"),
        claim("c", request("gpu", "gpu", capacity={"requests": {"bandwidth": wanted}})),
    ]
    entry = only(run(tmp_path, capsys, docs))
    (device,) = entry["results"][0]["devices"]["results"]
    assert device["consumedCapacity"] == {"bandwidth": printed}


@pytest.mark.parametrize(
    ("policy", "fits"),
    [
        ({"validRange": {"min": "1Gi", "max": "40Gi"}}, False),
        ({"default": "4Gi", "validRange": {"min": "1Gi", "max": "40Gi"}}, True),
    ],
)
def test_unrequested_capacity_with_a_policy_but_no_default_takes_the_whole_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: dict[str, Any], fits: bool
) -> None:
    # calculateConsumedQuantity: a capacity the request does not name consumes the policy default,
    # or without one the full value (80Gi); violatesPolicy then finds 80Gi above max 40Gi and the
    # device is skipped (not an error). With default 4Gi it fits and 4Gi is consumed.
    gpu = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "80Gi", "requestPolicy": policy}},
    }
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", [gpu], nodeName="node-1"),
        claim("c", request("gpu", "gpu")),
    ]
    entry = only(run(tmp_path, capsys, docs))
    assert entry["fits"] is fits and entry.get("error") is None
    if fits:
        assert entry["results"][0]["devices"]["results"][0]["consumedCapacity"] == {"memory": "4Gi"}


def test_unparsable_slice_node_selector_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GatherPools: nodeaffinity.NewNodeSelector rejects a Gt requirement with a non-integer value;
    # Allocate returns "gather pool information: failed to perform node selection for slice s: ...".
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["seven"]}]}]
    }
    docs = [
        node("node-1", rack="7"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "racks", ["gpu-0"], nodeSelector=selector),
        claim("c", request("gpu", "gpu")),
    ]
    entry = only(run(tmp_path, capsys, docs))
    assert entry["fits"] is False and entry["results"] == [None]
    assert entry.get("error").startswith(
        "gather pool information: failed to perform node selection for slice s: "
    )


def test_explaining_one_node_does_not_change_the_next_nodes_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One Allocator serves every node (as the scheduler's per-pod Allocator does), and its counter
    # cache is keyed by pool *name* (4.16a). node-1 has no NIC: upstream's search stops at the first
    # request and never computes counters; on node-2 the NIC pool "p" fills the cache (lanes 4), so
    # the second whole-set NIC is refused and the claim does not fit. Nothing draguard does beyond
    # the search (such as explaining node-1's failure) may put the GPU pool "p" counters there first.
    def consuming(name: str, counter_set: str, **amounts: str) -> dict[str, Any]:
        used = {c: {"value": v} for c, v in amounts.items()}
        return {"name": name, "consumesCounters": [{"counterSet": counter_set, "counters": used}]}

    def counter_set(name: str, **values: str) -> list[dict[str, Any]]:
        return [{"name": name, "counters": {c: {"value": v} for c, v in values.items()}}]

    def pool(count: int) -> dict[str, Any]:
        return {"name": "p", "generation": 1, "resourceSliceCount": count}

    docs = [
        node("node-1"),
        node("node-2"),
        device_class("gpu", GPU),
        device_class("nic", NIC),
        resource_slice(
            "gpu-counters",
            GPU,
            "p",
            [],
            pool=pool(3),
            allNodes=True,
            sharedCounters=counter_set("mem", units="8"),
        ),
        resource_slice(
            "gpu-n1", GPU, "p", [consuming("gpu-0", "mem", units="1")], pool=pool(3), nodeName="node-1"
        ),
        resource_slice(
            "gpu-n2", GPU, "p", [consuming("gpu-1", "mem", units="1")], pool=pool(3), nodeName="node-2"
        ),
        resource_slice(
            "nic-counters",
            NIC,
            "p",
            [],
            pool=pool(2),
            allNodes=True,
            sharedCounters=counter_set("lanes", lanes="4"),
        ),
        resource_slice(
            "nic-n2",
            NIC,
            "p",
            [consuming("nic-0", "lanes", lanes="4"), consuming("nic-1", "lanes", lanes="4")],
            pool=pool(2),
            nodeName="node-2",
        ),
        claim("c", request("nics", "nic", count=2), request("gpu", "gpu")),
    ]
    on_node1, on_node2 = run(tmp_path, capsys, docs)["nodes"]
    assert on_node1["fits"] is False and on_node1.get("error") is None
    assert on_node2["fits"] is False and on_node2.get("error") is None


def test_a_selector_that_compiles_nowhere_fails_as_in_the_scheduler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A claim is never validated again once stored, so the cluster may hold one whose selector does
    # not compile: kube-scheduler compiles it when it first checks a device (selectorsMatch) and
    # fails the node there; a node without devices of the class refuses for want of devices. allocate
    # answers the same, and warns with validate's line and what it means for the stored claim.
    broken = {"cel": {"expression": "device.attributes[1 +"}}
    docs = [
        node("node-1"),
        node("node-2"),
        device_class("gpu", GPU),
        resource_slice("n1", GPU, "node-1", ["gpu-0"], nodeName="node-1"),
        claim("c", request("gpu", "gpu", selectors=[broken])),
    ]
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    assert main(["allocate", "-f", str(path), "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert (
        f"warning: {path}: document 5: ResourceClaim default/c: spec.devices.requests[0].exactly."
        'selectors[0].cel.expression: Invalid value: "device.attributes[1 +": compilation failed'
    ) in err
    assert "an existing ResourceClaim with this selector does not work either" in err
    (pod,) = json.loads(out)["pods"]
    assert pod["message"].startswith('running "DynamicResources" filter plugin: claim default/c: selector #0')
    node1, node2 = pod["nodes"]
    assert node1["error"].startswith("claim default/c: selector #0: CEL compile error: compilation failed")
    assert (node2["fits"], node2["reasons"]) == (False, ["cannot allocate all claims"])
    assert "error" not in node2


def test_invalid_pool_fails_only_that_node_with_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Allocate: nothing fits on node-2 and one of its pools is invalid (duplicate device name) ->
    # "invalid resource pools were encountered" wrapping ErrFailedAllocationOnNode (whose own text is
    # empty): an error for that node only. node-1, with a valid pool, allocates normally.
    docs = [
        node("node-1"),
        node("node-2"),
        device_class("gpu", GPU),
        resource_slice("n1", GPU, "node-1", ["gpu-0"], nodeName="node-1"),
        resource_slice("n2", GPU, "node-2", ["gpu-0", "gpu-0"], nodeName="node-2"),
        claim("c", request("gpu", "gpu")),
    ]
    on_node1, on_node2 = run(tmp_path, capsys, docs)["nodes"]
    assert on_node1["fits"] is True and on_node1.get("error") is None
    assert on_node2["fits"] is False and on_node2["results"] == [None]
    assert on_node2.get("error") == "invalid resource pools were encountered"


def test_error_text_names_a_namespace_less_claim_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # validateDeviceRequest formats the claim with klog.KObj, which prints "name" for an object
    # without namespace and "namespace/name" otherwise. Upstream's allocator fed these manifests sees
    # metadata.namespace unset (as in its own fixtures), so the error starts "claim c, request gpu:".
    bare = claim("c", request("gpu", "gpu", adminAccess=True))
    del bare["metadata"]["namespace"]
    docs = [node("node-1"), device_class("gpu", GPU), bare]
    entry = only(run(tmp_path, capsys, docs, "--features", "DRAAdminAccess=false"))
    disabled = "claim c, request gpu: admin access is requested, but the feature is disabled"
    assert entry["error"].startswith(disabled)


def test_every_allocated_claim_in_the_input_holds_its_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The allocated state is built from every allocated claim handed over (foreachAllocatedDevice per
    # claim); both keep their devices busy, so the new claim gets gpu-2. (Two claims sharing a name
    # are refused as input: a cluster cannot hold them, see the duplicate test above.)
    docs = [
        node("node-1"),
        device_class("gpu", GPU),
        resource_slice("s", GPU, "node-1", ["gpu-0", "gpu-1", "gpu-2"], nodeName="node-1"),
        allocated(claim("holder", request("gpu", "gpu")), result("gpu", GPU, "node-1", "gpu-0")),
        allocated(claim("holder-2", request("gpu", "gpu")), result("gpu", GPU, "node-1", "gpu-1")),
        claim("c", request("gpu", "gpu")),
    ]
    assert picked(only(run(tmp_path, capsys, docs))) == [f"{GPU}/node-1/gpu-2"]
