"""policies.footprint: KEP-5517 device mappings (1.36 and 1.37 shapes) and the pod footprint.

The expectations are worked out by hand from dra-reference 6.2/6.3 and upstream
``component-helpers/resource/helpers.go`` (PodRequests/PodLimits), never read back from the code.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from policies.api.core import Pod
from policies.api.kinds import decode
from policies.api.quantity import Quantity
from policies.api.resource import AllocationResult, Device, ResourceSlice
from policies.dryrun import DryRun, FeatureGates, Prepared, Question, synthetic_pod
from policies.footprint import (
    ClaimFootprint,
    ClaimUse,
    FootprintError,
    claim_footprint,
    declares_mapping,
    device_footprint,
    device_index,
    pod_limits,
    pod_requests,
    referencing_containers,
    status_claims,
)
from policies.snapshot import Snapshot

Q = Quantity.parse


def q(**amounts: str) -> dict[str, Quantity]:
    return {name.replace("_", "-"): Q(v) for name, v in amounts.items()}


def device(**fields: Any) -> Device:
    return Device.model_validate({"name": "d", **fields})


def container(
    name: str, *claims: str, restart: str | None = None, **resources: dict[str, str]
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "resources": dict(resources)}
    if claims:
        body["resources"]["claims"] = [{"name": c} for c in claims]
    if restart:
        body["restartPolicy"] = restart
    return body


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **spec: Any) -> Pod:
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = list(init)
    obj = decode(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": body}
    )
    assert isinstance(obj, Pod)
    return obj


# --- devices ---------------------------------------------------------------------------------------


def test_137_mapping_from_consumed_capacity_times_multiplier() -> None:
    d = device(
        nodeAllocatableResources={
            "cpu": {"mapping": {"capacityKey": "cpu.example.com/cpu", "capacityMultiplier": "2"}}
        }
    )
    fp = device_footprint(d, q(**{"cpu.example.com/cpu": "8"}), "drv/pool/d")
    assert fp.mapped == q(cpu="16") and fp.has_mapping
    # A capacity the allocation did not consume yields nothing.
    assert device_footprint(d, q(other="1"), "drv/pool/d").is_empty


def test_137_mapping_without_consumed_capacity_is_an_error_naming_the_device() -> None:
    d = device(nodeAllocatableResources={"cpu": {"mapping": {"capacityKey": "c", "capacityMultiplier": "1"}}})
    with pytest.raises(FootprintError, match="device drv/pool/d: cpu is mapped from capacity c"):
        device_footprint(d, None, "drv/pool/d")


def test_137_device_multiplier_and_overhead() -> None:
    d = device(
        nodeAllocatableResources={
            "cpu": {"mapping": {"deviceMultiplier": "2"}},
            "memory": {"overhead": {"perPod": "1Gi", "perContainer": "500Mi"}},
        }
    )
    fp = device_footprint(d, None, "x")
    assert fp == ClaimFootprint(q(cpu="2"), q(memory="1Gi"), q(memory="500Mi"))
    assert fp.for_pod(3) == q(cpu="2", memory="2524Mi")
    assert fp.for_pod(0) == q(cpu="2", memory="1Gi")


def test_136_mappings_multiplier_per_device_or_times_capacity() -> None:
    per_device = device(
        nodeAllocatableResourceMappings={"memory": {"allocationMultiplier": "2Gi"}, "cpu": {}}
    )
    assert device_footprint(per_device, None, "x").mapped == q(memory="2Gi", cpu="1")
    capacity = device(
        nodeAllocatableResourceMappings={
            "cpu": {"capacityKey": "dra.example.com/cores", "allocationMultiplier": "2"}
        }
    )
    assert device_footprint(capacity, q(**{"dra.example.com/cores": "8"}), "x").mapped == q(cpu="16")


def test_claim_sums_devices_skips_admin_access_and_unknown_devices() -> None:
    slices = [
        decode(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "s"},
                "spec": {
                    "driver": "cpu.example.com",
                    "nodeName": "n",
                    "pool": {"name": "n", "resourceSliceCount": 1},
                    "devices": [
                        {"name": f"core-{i}", "nodeAllocatableResourceMappings": {"cpu": {}}}
                        for i in range(3)
                    ],
                },
            }
        )
    ]
    index = device_index(s for s in slices if isinstance(s, ResourceSlice))
    allocation = AllocationResult.model_validate(
        {
            "devices": {
                "results": [
                    {"request": "r", "driver": "cpu.example.com", "pool": "n", "device": "core-0"},
                    {"request": "r", "driver": "cpu.example.com", "pool": "n", "device": "core-1"},
                    {
                        "request": "r",
                        "driver": "cpu.example.com",
                        "pool": "n",
                        "device": "core-2",
                        "adminAccess": True,
                    },
                    {"request": "r", "driver": "cpu.example.com", "pool": "n", "device": "gone"},
                ]
            }
        }
    )
    assert claim_footprint(allocation, index).mapped == q(cpu="2")


def test_device_index_keeps_the_newest_generation_of_a_pool() -> None:
    def slice_(name: str, generation: int, dev: str) -> Any:
        return decode(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {
                    "driver": "d",
                    "nodeName": "n",
                    "pool": {"name": "p", "generation": generation, "resourceSliceCount": 1},
                    "devices": [{"name": dev}],
                },
            }
        )

    index = device_index([slice_("a", 2, "new"), slice_("b", 1, "old"), slice_("c", 3, "newest")])
    assert set(index) == {("d", "p", "newest")}


# --- the worked example of dra-reference 6.3, through the allocator --------------------------------

WORKED = """
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: cpu}
spec: {selectors: [{cel: {expression: device.driver == "cpu.example.com"}}]}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: cpu}
spec:
  driver: cpu.example.com
  nodeName: node-1
  pool: {name: node-1, resourceSliceCount: 1}
  devices:
  - name: socket0
    allowMultipleAllocations: true
    capacity: {cpu.example.com/cpu: {value: "128"}}
    nodeAllocatableResources:
      cpu: {mapping: {capacityKey: cpu.example.com/cpu, capacityMultiplier: "1"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    nodeAllocatableResources:
      memory: {overhead: {perPod: 1Gi, perContainer: 500Mi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: cores, namespace: ns}
spec:
  devices:
    requests:
    - name: cores
      exactly:
        deviceClassName: cpu
        allocationMode: ExactCount
        count: 1
        capacity: {requests: {cpu.example.com/cpu: "4"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: ns}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu, allocationMode: ExactCount, count: 1}
"""


def test_worked_example_cpu_1_plus_4_and_two_gpu_containers_1gi_plus_2x500mi() -> None:
    snapshot = Snapshot.build(decode(o) for o in yaml.safe_load_all(WORKED))
    claims = (snapshot.claims[("ns", "cores")], snapshot.claims[("ns", "gpu")])
    dry = DryRun(Prepared.of(snapshot, FeatureGates()))
    outcome = dry.outcome(Question(synthetic_pod("ns"), claims), ["node-1"])
    assert [v.node for v in outcome.fitting] == ["node-1"]
    index = device_index(snapshot.slices)
    cores, gpu = (claim_footprint(r, index) for r in outcome.dra.results("node-1"))
    assert cores.mapped == q(cpu="4")
    assert gpu == ClaimFootprint({}, q(memory="1Gi"), q(memory="500Mi"))

    p = pod(
        container("main", "cores", "gpu", requests={"cpu": "1"}),
        container("helper", "gpu"),
        resourceClaims=[
            {"name": "cores", "resourceClaimName": "cores"},
            {"name": "gpu", "resourceClaimName": "gpu"},
        ],
    )
    assert referencing_containers(p, "gpu") == ("main", "helper")
    uses = [
        ClaimUse(cores, referencing_containers(p, "cores")),
        ClaimUse(gpu, referencing_containers(p, "gpu")),
    ]
    # dra-reference 6.3 says "+2Gi": exactly it is 1Gi + 2 x 500Mi = 2024Mi (1000Mi is not 1Gi).
    assert pod_requests(p, uses) == q(cpu="5", memory="2024Mi")


def test_claim_counted_once_per_pod_however_many_containers_reference_it() -> None:
    cores = ClaimFootprint(q(cpu="4"))
    p = pod(container("a", "c", requests={"cpu": "1"}), container("b", "c", requests={"cpu": "1"}))
    assert pod_requests(p, [ClaimUse(cores, ("a", "b"))]) == q(cpu="6")
    # Even a claim no container references is charged (the pod holds its devices).
    assert pod_requests(p, [ClaimUse(cores, ())]) == q(cpu="6")


# --- containers: init and sidecar rules --------------------------------------------------------------


def test_init_container_peak_wins_over_the_sum_of_small_regular_containers() -> None:
    p = pod(
        container("a", requests={"cpu": "1"}),
        container("b", requests={"cpu": "1"}),
        init=(container("setup", requests={"cpu": "3", "memory": "1Gi"}),),
    )
    assert pod_requests(p) == q(cpu="3", memory="1Gi")


def test_sidecars_add_to_regular_containers_and_to_later_init_containers() -> None:
    p = pod(
        container("main", requests={"cpu": "2"}),
        init=(
            container("log", restart="Always", requests={"cpu": "1"}),
            container("migrate", requests={"cpu": "4"}),
            container("proxy", restart="Always", requests={"cpu": "500m"}),
        ),
    )
    # Regular sum: 2 + 1 + 0.5 = 3.5; init peak: migrate 4 + log 1 = 5.
    assert pod_requests(p) == q(cpu="5")
    small = pod(
        container("main", requests={"cpu": "2"}),
        init=(
            container("log", restart="Always", requests={"cpu": "1"}),
            container("migrate", requests={"cpu": "2"}),
        ),
    )
    assert pod_requests(small) == q(cpu="3")


def test_per_container_overhead_joins_each_referencing_container_and_init_ones_count_at_their_peak() -> None:
    """helpers.go aggregateContainerResourcesByFn: perContainer is added to the requests of the
    container that references the claim, before the init containers' peak is taken; mapped
    amounts and perPod stay fixed for the pod's life (dra-reference 6.3)."""
    gpu = ClaimFootprint({}, q(memory="1Gi"), q(memory="500Mi"))
    p = pod(
        container("main", "gpu", requests={"memory": "1Gi"}),
        init=(container("warmup", "gpu", requests={"memory": "4Gi"}),),
    )
    assert referencing_containers(p, "gpu") == ("warmup", "main")
    # max(main 1024Mi + 500Mi, warmup 4096Mi + 500Mi) + 1024Mi per pod.
    assert pod_requests(p, [ClaimUse(gpu, ("warmup", "main"))]) == q(memory="5620Mi")
    # A sidecar runs beside the regular containers: its share adds up with theirs.
    sidecar = pod(
        container("main", "gpu", requests={"memory": "1Gi"}),
        init=(container("proxy", "gpu", restart="Always", requests={"memory": "1Gi"}),),
    )
    assert pod_requests(sidecar, [ClaimUse(gpu, ("proxy", "main"))]) == q(memory="4072Mi")  # 2 x 1524 + 1024
    # A reference to a container the spec does not have is charged for the pod's whole life.
    assert pod_requests(p, [ClaimUse(gpu, ("warmup", "main", "gone"))]) == q(memory="6120Mi")


def test_pod_level_requests_replace_cpu_and_memory_and_overhead_is_added_last() -> None:
    p = pod(
        container("main", requests={"cpu": "1", "ephemeral-storage": "1Gi"}),
        resources={"requests": {"cpu": "8"}},
        overhead={"cpu": "250m", "memory": "64Mi"},
    )
    uses = [ClaimUse(ClaimFootprint(q(cpu="4", ephemeral_storage="1Gi")), ("main",))]
    assert pod_requests(p, uses) == q(cpu="8250m", memory="64Mi", ephemeral_storage="2Gi")


def test_limits_only_grow_where_declared_except_hugepages() -> None:
    uses = [ClaimUse(ClaimFootprint(q(cpu="4", memory="1Gi", hugepages_2Mi="1Gi")), ("main",))]
    declared = pod(container("main", limits={"cpu": "2"}), overhead={"cpu": "100m", "memory": "10Mi"})
    # cpu declared: 2 + 4 + overhead; memory undeclared stays unlimited; hugepages always.
    assert pod_limits(declared, uses) == q(cpu="6100m", hugepages_2Mi="1Gi")
    pod_level = pod(container("main", limits={"cpu": "2"}), resources={"limits": {"cpu": "3"}})
    assert pod_limits(pod_level, uses) == q(cpu="3", hugepages_2Mi="1Gi")


def test_status_entries_in_both_shapes() -> None:
    p = Pod.model_validate(
        {
            "spec": {"containers": []},
            "status": {
                "nodeAllocatableResourceClaimStatuses": [
                    {"resourceClaimName": "old", "containers": ["a"], "resources": {"cpu": "2"}},
                    {
                        "resourceClaimName": "new",
                        "containers": ["a", "b"],
                        "mapping": [{"name": "cpu", "quantity": "3"}],
                        "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "1Gi"}],
                    },
                ]
            },
        }
    )
    assert pod_requests(p, status_claims(p)) == q(cpu="5", memory="3Gi")


def test_declares_mapping_in_either_shape() -> None:
    assert declares_mapping(device(nodeAllocatableResourceMappings={"cpu": {}}))
    assert declares_mapping(device(nodeAllocatableResources={"cpu": {"mapping": {"deviceMultiplier": "1"}}}))
    assert not declares_mapping(device(nodeAllocatableResources={"memory": {"overhead": {"perPod": "1Gi"}}}))
    assert not declares_mapping(device())


def test_a_snapshot_builds_its_device_index_once() -> None:
    first = Snapshot.build(decode(o) for o in yaml.safe_load_all(WORKED))
    index = first.devices
    assert first.devices is index
    assert set(index) == {("cpu.example.com", "node-1", "socket0"), ("gpu.example.com", "node-1", "gpu-0")}
    second = Snapshot.build(decode(o) for o in list(yaml.safe_load_all(WORKED))[:4])
    assert set(second.devices) == {("cpu.example.com", "node-1", "socket0")}
