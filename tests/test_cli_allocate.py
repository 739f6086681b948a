"""``draguard allocate`` end to end on the bundled example cluster (in-process CLI calls)."""

import json
from pathlib import Path

import pytest

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
    assert lines[0].split() == ["NODE", "FITS", "DEVICES", "REASON"]
    node1, node2, node3 = lines[1:]
    assert node1.split()[:3] == ["node-1", "no", "-"]
    assert "2 are already allocated" in node1
    assert node2.split()[:3] == ["node-2", "yes", "node-2/gpu-0,node-2/gpu-1,node-2/gpu-2"]
    assert "do not match the request's selectors" in node3


def test_json_shape_is_exactly_the_documented_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["nodes"]
    assert [n["node"] for n in doc["nodes"]] == ["node-1", "node-2", "node-3"]
    for entry in doc["nodes"]:
        assert list(entry) == ["node", "allocated", "results", "error", "explanation"]
        assert len(entry["results"]) == 1  # one waiting claim
    fit = doc["nodes"][1]
    assert fit["allocated"] is True and fit["error"] is None
    result = fit["results"][0]
    assert [r["device"] for r in result["devices"]["results"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert {r["request"] for r in result["devices"]["results"]} == {"gpus"}
    assert result["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}
        ]
    }
    miss = doc["nodes"][0]
    assert miss["results"] == [None]
    assert miss["explanation"]["requests"][0]["rejected"]["allocated"] == 2


def test_repeat_adds_timing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "-o", "json", "--repeat", "2", "--node", "node-2")
    timing = json.loads(out)["nodes"][0]["timing"]
    assert code == 0
    assert set(timing) == {"firstNs", "medianNs"} and timing["medianNs"] > 0


def test_exit_1_when_no_node_fits(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "--node", "node-1", "--node", "node-3", "-o", "yaml")
    assert code == 1
    assert "allocated: false" in out and "allocated: true" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "node-9"], "--node node-9: no such Node in the input (nodes: node-1, node-2, node-3)"),
        (["--features", "gpuMagic"], "unknown allocator feature(s) gpuMagic"),
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
    node1, node2, node3 = (n["error"] for n in json.loads(out)["nodes"])
    # node-2 needs a search and runs out of budget; node-1 (2 usable devices for 3) and node-3 (no
    # device passes the selectors) are refused before any search, so the budget does not matter.
    assert node2.startswith("filter operation aborted: search effort limit of 1 steps exceeded")
    assert "gave up" in node2
    assert node1 is None and node3 is None


def test_pod_claims_come_from_its_template(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", CLUSTER, "-f", WORKLOADS, "-o", "json")
    doc = json.loads(out)
    fits = [n["node"] for n in doc["nodes"] if n["allocated"]]
    assert code == 0 and fits == ["node-3"]  # only node-3 has 80Gi GPUs
    result = doc["nodes"][2]["results"][0]
    assert result["devices"]["results"][0]["request"] == "gpu"
    assert result["devices"]["config"][0]["source"] == "FromClass"
