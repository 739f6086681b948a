"""``draguard headroom`` end to end (in-process CLI calls) on clusters of ``test_headroom``'s shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_headroom import (
    CLASSES,
    NS,
    gpus,
    node,
    partitioned,
    pod,
    quota,
    request,
    shared_links,
    template,
    zones,
)

from webhook.cli import main

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, objects: list[dict[str, Any]], *args: str):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([NAMESPACE, *objects]))
    code = main(["headroom", "-f", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def gpu_fleet() -> list[dict[str, Any]]:
    """Six nodes in two zones with 1, 2 or 3 GPUs each (12 in all), and a one-GPU pod."""
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",))]
    for i, (name, zone) in enumerate(zones(6)):
        objects += [node(name, zone), gpus(name, i % 3 + 1)]
    return objects


def test_the_table_says_how_many_where_and_what_stops_the_next(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, tmp_path, gpu_fleet())
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "POD team-a/train: 12 more copies fit on 6 nodes in 2 zones"
    assert lines[1].split() == ["NODE", "ZONE", "COPIES"]
    rows = [line.split() for line in lines[2:8]]
    assert {(name, copies) for name, _, copies in rows} == {(f"node-{i}", str(i % 3 + 1)) for i in range(6)}
    assert [int(copies) for *_, copies in rows] == sorted((i % 3 + 1 for i in range(6)), reverse=True)
    assert lines[8] == (
        "NEXT COPY (Scheduler): 0/6 nodes are available: 6 cannot allocate all claims. still not "
        "schedulable, preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
    )
    assert lines[9] == "  devices of class gpu: 0 free of 12 (zone a: 0, zone b: 0)"


def test_json_is_the_versioned_headroom_document(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, tmp_path, gpu_fleet(), "--max", "5", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == [
        "apiVersion",
        "kind",
        "pod",
        "copies",
        "max",
        "nodes",
        "zones",
        "order",
        "limit",
        "charge",
        "quotas",
        "notChecked",
        "features",
    ]
    assert (doc["apiVersion"], doc["kind"], doc["pod"], doc["copies"], doc["max"]) == (
        "draguard.io/v1alpha1",
        "HeadroomAnswer",
        "team-a/train",
        5,
        5,
    )
    assert len(doc["order"]) == 5
    assert {n["node"]: n["copies"] for n in doc["nodes"]} == {n: doc["order"].count(n) for n in doc["order"]}
    zone_of = {f"node-{i}": "ab"[i % 2] for i in range(6)}
    by_zone = {z["zone"]: z["copies"] for z in doc["zones"]}
    assert by_zone == {z: sum(zone_of[n] == z for n in doc["order"]) for z in set(by_zone)}
    assert doc["limit"] == {
        "by": "Max",
        "message": "stopped after 5 copies, as asked",
        "detail": [
            f"devices of class gpu: 7 free of 12 (zone a: {6 - by_zone.get('a', 0)}, zone b: "
            f"{6 - by_zone.get('b', 0)})"
        ],
        "victims": [],
    }
    assert doc["charge"]["pods"] == "1" and doc["charge"]["requests.cpu"] == "1"


def test_a_quota_that_stops_them_first_is_named_with_its_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    objects = [*gpu_fleet(), quota({"pods": "6", "requests.cpu": "100"}, {"pods": "2", "requests.cpu": "2"})]
    code, out, _ = run(capsys, tmp_path, objects)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("POD team-a/train: 4 more copies fit")
    assert (
        'NEXT COPY (Quota): pods "train-copy-5" is forbidden: exceeded quota: team-a, requested: pods=1, '
        "used: pods=6, limited: pods=6"
    ) in lines
    assert lines[-1] == "  quota team-a: pods 6/6, requests.cpu 6/100 (used/hard, after the copies)"


def test_counters_and_capacity_left_are_in_the_detail(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    objects = [*CLASSES, template("q", [request("q", "mig-quarter")]), pod(templates=("q",))]
    objects += [node("node-0", "a"), *partitioned("node-0"), node("node-1", "b"), *partitioned("node-1")]
    _, out, _ = run(capsys, tmp_path, objects)
    assert "  counters memory of class mig-quarter: exhausted on 2 nodes" in out.splitlines()
    _, out, _ = run(capsys, tmp_path, shared_links())
    assert out.splitlines()[0] == "POD team-a/train: 4 more copies fit on 2 nodes in 2 zones"
    assert "  capacity bandwidth of class nic: 20G free of 140G" in out.splitlines()


def test_a_workloads_template_counts_as_its_pod(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = pod(templates=("gpu",))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer", "namespace": NS},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "infer"}},
            "template": {"metadata": {"labels": {"app": "infer"}}, "spec": spec["spec"]},
        },
    }
    objects = [o for o in gpu_fleet() if o["kind"] != "Pod"] + [deployment]
    code, out, err = run(capsys, tmp_path, objects, "--pod", f"{NS}/infer", "--max", "2")
    assert code == 0
    assert "Deployment team-a/infer: placing copies of its template's pod (spec.template)" in err
    assert out.splitlines()[0] == "POD team-a/infer: 2 more copies fit on 2 nodes in 2 zones"


def test_exit_1_when_no_copy_fits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",)), node("node-0", "a")]
    code, out, _ = run(capsys, tmp_path, objects)
    assert code == 1
    assert out.splitlines()[0] == "POD team-a/train: 0 more copies fit"
    assert out.splitlines()[2] == "  devices of class gpu: 0 free of 0"


@pytest.mark.parametrize(
    ("args", "extra", "message"),
    [
        (["--max", "0"], [], "error: --max must be at least 1, got 0"),
        (["--pod", "team-a/nope"], [], "error: --pod team-a/nope: no such pending pod in the input"),
        ([], [pod("other")], "error: --pod: give the pending pod whose copies to place (pending: "),
    ],
)
def test_bad_arguments_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    args: list[str],
    extra: list[dict[str, Any]],
    message: str,
) -> None:
    code, _, err = run(capsys, tmp_path, [*gpu_fleet(), *extra], *args)
    assert code == 2
    assert err.splitlines()[-1].startswith(message)
