"""``draguard allocate`` end to end on the bundled example cluster (in-process CLI calls)."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CLUSTER = str(EXAMPLES / "gpu-cluster")
WORKLOADS = str(EXAMPLES / "workloads")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["allocate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_shows_where_the_waiting_claim_fits_and_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER)
    assert code == 0
    lines = out.splitlines()
    # Without a pending pod the unallocated claims are asked about as one pod using them.
    assert lines[0] == "POD team-a/dryrun: fits on 1 of 3 nodes: node-2"
    assert lines[1].split() == ["NODE", "FITS", "SCORE", "DEVICES", "REASON"]
    node1, node2, node3 = lines[2:5]
    assert node1.split()[:4] == ["node-1", "no", "-", "-"]
    assert "2 are already allocated" in node1
    devices = ",".join(f"gpu.example.com/node-2/gpu-{i}" for i in range(3))  # DRIVER/POOL/DEVICE
    assert node2.split()[:4] == ["node-2", "yes", "-", devices]
    assert "do not match the request's selectors" in node3


def test_what_is_not_checked_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """A note names the filter that did not run and says it was not checked: a bare
    'NodeDeclaredFeatures: node-declared features' read as if it were a finding."""
    _, out, _ = run(capsys, "-f", CLUSTER)
    assert out.splitlines()[-1] == (
        "note: NodeDeclaredFeatures: not checked: node-declared features (status.declaredFeatures)"
    )


def test_json_shape_is_exactly_the_documented_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["apiVersion", "kind", "pods", "features"]
    assert (doc["apiVersion"], doc["kind"]) == ("draguard.io/v1alpha1", "DryRunAnswer")
    (pod,) = doc["pods"]
    assert (pod["pod"], pod["claims"], pod["fits"]) == ("team-a/dryrun", ["team-a/three-a100"], True)
    assert [n["node"] for n in pod["nodes"]] == ["node-1", "node-2", "node-3"]
    miss, fit, _ = pod["nodes"]
    assert list(miss) == ["node", "fits", "plugin", "reasons", "detail", "explanation", "results"]
    assert list(fit) == ["node", "fits", "reasons", "results", "rank", "stranded", "footprint", "quota"]
    assert fit["fits"] is True and fit["rank"] == 1
    result = fit["results"][0]
    assert [r["device"] for r in result["devices"]["results"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert {r["request"] for r in result["devices"]["results"]} == {"gpus"}
    assert result["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}
        ]
    }
    assert miss["results"] == [None]
    assert (miss["plugin"], miss["reasons"]) == ("DynamicResources", ["cannot allocate all claims"])
    assert miss["explanation"]["requests"][0]["rejected"]["allocated"] == 2


def test_repeat_adds_timing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "-o", "json", "--repeat", "2", "--node", "node-2")
    timing = json.loads(out)["pods"][0]["nodes"][0]["timing"]
    assert code == 0
    assert set(timing) == {"firstNs", "medianNs"} and timing["medianNs"] > 0


def test_exit_1_when_no_node_fits(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "--node", "node-1", "--node", "node-3", "-o", "yaml")
    assert code == 1
    assert "fits: false" in out and "fits: true" not in out
    assert "message: '0/2 nodes are available: 2 cannot allocate all claims." in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "node-9"], "--node node-9: no such Node in the input (nodes: node-1, node-2, node-3)"),
        (["--features", "gpuMagic"], "unknown allocator feature(s) gpuMagic"),
        (["--features", "DRAMagic=true"], "DRAMagic=true: unknown feature gate 'DRAMagic'"),
        (["--pod", "team-a/nope"], "--pod team-a/nope: no such pending pod in the input (pending: none)"),
    ],
)
def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, out, err = run(capsys, "-f", CLUSTER, *args)
    assert code == 2 and out == ""
    assert message in err


def test_unreadable_input_exits_2_without_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Node\nmetadata: [oops]\n")
    code, _, err = run(capsys, "-f", str(bad))
    assert code == 2
    assert "document 1: Node <no name>: metadata: Invalid value" in err and "Traceback" not in err


def test_search_budget_gives_up_with_a_reported_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "-o", "json", "--max-steps", "1")
    assert code == 1
    node1, node2, node3 = (n.get("error") for n in json.loads(out)["pods"][0]["nodes"])
    # node-2 needs a search and runs out of budget; node-1 (2 usable devices for 3) and node-3 (no
    # device passes the selectors) are refused before any search, so the budget does not matter.
    assert node2.startswith("filter operation aborted: search effort limit of 1 steps exceeded")
    assert "gave up" in node2
    assert node1 is None and node3 is None
    # A filter timeout is an Error since 1.36 (dynamicresources.go Filter): the attempt is aborted.
    pod = json.loads(out)["pods"][0]
    assert pod["reason"] == "SchedulerError"
    assert (
        pod["message"]
        == 'running "DynamicResources" filter plugin: node node-2: timed out trying to allocate devices'
    )


def test_pod_claims_come_from_its_template(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "-f", WORKLOADS, "-o", "json")
    (pod,) = json.loads(out)["pods"]
    fits = [n["node"] for n in pod["nodes"] if n["fits"]]
    assert code == 0 and fits == ["node-3"]  # only node-3 has 80Gi GPUs
    assert pod["pod"] == "team-a/inference" and pod["claims"] == ["team-a/inference-gpu"]
    result = pod["nodes"][2]["results"][0]
    assert result["devices"]["results"][0]["request"] == "gpu"
    assert result["devices"]["config"][0]["source"] == "FromClass"


def one_gpu_cluster() -> list[dict[str, object]]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "10"}},
    }
    gpu_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
    }
    pool = {"name": "node-1", "generation": 1, "resourceSliceCount": 1}
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpus"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-1",
            "pool": pool,
            "devices": [{"name": "gpu-0"}],
        },
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}},
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one"}],
                "containers": [
                    {
                        "name": "c",
                        "image": "app:1",
                        "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "g"}]},
                    }
                ],
            },
        }
        for name in ("first", "second")
    ]
    return [node, gpu_class, slice_, template, *pods]


def test_every_pending_pod_is_answered_and_in_sequence_each_sees_what_the_previous_took(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "two-pods.yaml"
    path.write_text("\n---\n".join(json.dumps(o) for o in one_gpu_cluster()))
    code, out, _ = run(capsys, "-f", str(path), "-o", "json")
    assert code == 0 and [(p["pod"], p["fits"]) for p in json.loads(out)["pods"]] == [
        ("default/first", True),
        ("default/second", True),  # asked alone, each fits
    ]
    code, out, _ = run(capsys, "-f", str(path), "-o", "json", "--sequence")
    first, second = json.loads(out)["pods"]
    assert code == 1 and first["placedOn"] == "node-1"
    assert second["message"] == (
        "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes "
        "are available: 1 Preemption is not helpful for scheduling."
    )
    code, out, _ = run(capsys, "-f", str(path), "--pod", "default/second", "-o", "json")
    assert [p["pod"] for p in json.loads(out)["pods"]] == ["default/second"]
    _, out, _ = run(capsys, "-f", str(path), "--sequence")
    head = out.splitlines()[0]
    assert head == "POD default/first: fits on 1 of 1 nodes: node-1; --sequence places it on node-1"


def test_a_statefulsets_claim_templates_are_volumes_not_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Its controller gives each pod a PersistentVolumeClaim per volumeClaimTemplate: the answer
    says volumes were not checked, rather than a silent "fits"."""
    node, gpu_class, slice_, template, pod, _ = one_gpu_cluster()
    stateful = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": pod["spec"]},
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ],
        },
    }
    path = tmp_path / "stateful.yaml"
    path.write_text("\n---\n".join(json.dumps(o) for o in (node, gpu_class, slice_, template, stateful)))
    code, out, err = run(capsys, "-f", str(path), "-o", "json")
    assert code == 0, err
    (answer,) = json.loads(out)["pods"]
    assert answer["pod"] == "default/db"
    volumes = "VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone: not checked"
    assert any(note.startswith(volumes) for note in answer["notChecked"])


def test_an_input_without_the_cluster_says_how_to_get_it(capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's first try is the workload alone: the answer names the kubectl command that
    writes down the cluster to add with -f."""
    code, out, err = run(capsys, "-f", WORKLOADS)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "error: the input has no Node objects: add the cluster's, e.g. 'kubectl get nodes,deviceclasses,"
        "resourceslices,resourceclaims,resourceclaimtemplates,priorityclasses,pods -A -o yaml > "
        "cluster.yaml' and -f cluster.yaml"
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-steps", "0", "--max-steps must be at least 1, got 0"),
        ("--repeat", "-1", "--repeat must be at least 0, got -1"),
        ("--timeout", "0", "--timeout must be more than 0 seconds, got 0"),
    ],
)
def test_numbers_out_of_range_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    """--max-steps 0 ended in a traceback; a timeout of 0 or a negative repeat were taken."""
    code, out, err = run(capsys, "-f", CLUSTER, flag, value)
    assert (code, out, err) == (2, "", f"error: {message}\n")


# A training team's nodes full of batch pods, and the PriorityClasses that say who may evict whom.
PRIORITIES = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **more,
    }
    for name, value, more in (
        ("batch", 100, {}),
        ("training", 1000, {}),
        ("training-waits", 1000, {"preemptionPolicy": "Never"}),
    )
]
CLASSES = (
    "the PriorityClasses are batch, system-cluster-critical, system-node-critical, training, training-waits"
)


def node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": allocatable},
    }


def pod(name: str, cpu: str, **spec: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "registry.example.com/train:2",
        "resources": {"requests": {"cpu": cpu}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {**spec, "containers": [container]},
    }


def write_all(path: Path, *docs: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


@pytest.fixture
def full_nodes(tmp_path: Path) -> Path:
    """node-a runs one batch pod of 3 CPUs, node-b two of 2 CPUs."""
    return write_all(
        tmp_path / "cluster.yaml",
        *PRIORITIES,
        node("node-a"),
        node("node-b"),
        pod("etl", "3", nodeName="node-a", priorityClassName="batch"),
        pod("report-1", "2", nodeName="node-b", priorityClassName="batch"),
        pod("report-2", "2", nodeName="node-b", priorityClassName="batch"),
    )


def test_preemption_names_the_node_and_the_pods_evicted(
    capsys: pytest.CaptureFixture[str], full_nodes: Path, tmp_path: Path
) -> None:
    """Written with priorityClassName only, as people write pods: the class decides. On node-a one
    batch pod frees enough, on node-b both would have to go: node-a is nominated."""
    asked = write_all(
        tmp_path / "asked.yaml",
        pod("train", "2", priorityClassName="training"),
        pod("wait", "2", priorityClassName="training-waits"),
    )
    code, out, _ = run(capsys, "-f", str(full_nodes), "-f", str(asked))
    assert code == 1
    train, wait = (block.splitlines() for block in out.split("\n\n")[:2])
    assert train[:2] == [
        "POD ml/train: 0/2 nodes are available: 2 Insufficient cpu.",
        "  preemption: nominates node-a, evicting ml/etl",
    ]
    assert wait[0] == (
        "POD ml/wait: 0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert not wait[1].startswith("  preemption")
    _, out, _ = run(capsys, "-f", str(full_nodes), "-f", str(asked), "-o", "json", "--pod", "ml/train")
    (answer,) = json.loads(out)["pods"]
    assert (answer["nominated"], answer["victims"]) == ("node-a", ["ml/etl"])


def test_a_pod_of_a_class_the_input_lacks_is_refused_as_the_api_server_refuses_it(
    capsys: pytest.CaptureFixture[str], full_nodes: Path, tmp_path: Path
) -> None:
    template = {
        "metadata": {"labels": {"app": "serve"}},
        "spec": {"priorityClassName": "online", "containers": [{"name": "main", "image": "serve:1"}]},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"app": "serve"}}, "template": template},
    }
    asked = write_all(tmp_path / "asked.yaml", pod("train", "2", priorityClassName="trainig"), deployment)
    code, out, err = run(capsys, "-f", str(full_nodes), "-f", str(asked))
    assert (code, out) == (2, "")
    refused = 'pods "train" is forbidden: no PriorityClass with name trainig was found'
    assert f"Pod ml/train: {refused} ({CLASSES})" in err
    # The API server takes the Deployment; the pods its controller makes are what it refuses.
    would = "its pods would be refused: no PriorityClass with name online was found"
    assert f"Deployment ml/serve: spec.template: {would} ({CLASSES})" in err
