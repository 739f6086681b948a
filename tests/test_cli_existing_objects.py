"""Existing versus new (issue 24): ``validate`` judges documents as creates; the commands that read a
cluster as it stands (``allocate``, ``audit``, a test suite's ``state:``, ``serve --state``) answer
for every object the cluster holds, as kube-scheduler evaluates it, and only warn of what the API
server's validation says of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from test_cli_inputs import run, write

from policies.api.runtimeconfig import RuntimeConfig
from policies.reading import ReadOptions
from webhook.cli import main
from webhook.state import FileState

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "gpu-cluster"
INVENTORY = [str(CLUSTER / f) for f in ("classes.yaml", "nodes.yaml", "slices.yaml")]

# ``includes`` is declared only in the stored-expressions environment while DRAListTypeAttributes is
# off (its default in 1.36): a class written where the gate was on is held by the cluster, and the
# scheduler selects with it; a create of it now is refused.
LISTED = 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model.includes("a100")'
EXPENSIVE = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, " * 7 + "true" + ")" * 7
STORED_CLASS = f"""\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: a100-listed}}
spec:
  selectors:
  - cel: {{expression: '{LISTED}'}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: listed, namespace: team-a}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: a100-listed, count: 2}}
"""
KEEPS_WORKING = (
    "an existing DeviceClass with this selector keeps working: kube-scheduler compiles stored selectors in "
    "the stored-expressions environment, which has every function and field whatever the feature gates, "
    "and the API server lets it stay while it is unchanged"
)

PRIVILEGED = """\
apiVersion: v1
kind: Pod
metadata: {name: plugin, namespace: team-a}
spec:
  containers:
  - name: plugin
    image: registry.example.com/gpu-kubelet-plugin:1
    securityContext: {privileged: true}
"""


def test_validate_refuses_a_stored_only_selector_and_says_an_existing_class_keeps_working(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = write(tmp_path, "class.yaml", STORED_CLASS)
    code, out, _ = run(capsys, "validate", "-f", f)
    assert code == 1
    label = f"{f}: document 1: DeviceClass a100-listed: "
    error, expression, caret, note, summary = out.splitlines()
    assert (expression.strip(), caret.strip()) == (f"| {LISTED}", "| " + "." * 89 + "^")
    assert error.startswith(f"{label}spec.selectors[0].cel.expression: Invalid value: ")
    assert error.endswith("undeclared reference to 'includes' (in container '')")
    assert note == f"{label}warning: spec.selectors[0].cel.expression: {KEEPS_WORKING}"
    assert summary == "2 objects: 1 valid, 1 invalid (1 problem, 1 warning)"


@pytest.mark.parametrize(
    ("expression", "note"),
    [
        (
            EXPENSIVE,
            "an existing DeviceClass with this selector still selects devices (kube-scheduler compiles it in "
            "the stored-expressions environment), but the API server refuses every update of the class "
            "until the selector changes",
        ),
        (
            "device.nosuch()",
            "an existing DeviceClass with this selector does not work either: kube-scheduler compiles stored "
            "selectors in the stored-expressions environment, and it does not compile there",
        ),
    ],
)
def test_what_a_refused_selector_means_for_an_existing_class(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, expression: str, note: str
) -> None:
    f = write(tmp_path, "class.yaml", STORED_CLASS.replace(LISTED, expression))
    code, out, _ = run(capsys, "validate", "-f", f)
    assert code == 1
    assert f"DeviceClass a100-listed: warning: spec.selectors[0].cel.expression: {note}" in out


def test_allocate_allocates_with_a_class_only_the_stored_environment_compiles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The scheduler evaluates the class as stored: only the A100s match, two on each of node-1 and
    node-2 (node-3's devices are H100s). allocate answers that, and warns with validate's line."""
    f = write(tmp_path, "class.yaml", STORED_CLASS)
    code, out, err = run(capsys, "allocate", "-f", *INVENTORY, f, "-o", "json")
    assert code == 0, err
    (pod,) = json.loads(out)["pods"]
    fitting = {n["node"]: n for n in pod["nodes"] if n["fits"]}
    assert sorted(fitting) == ["node-1", "node-2"]
    devices = [r["device"] for r in fitting["node-1"]["results"][0]["devices"]["results"]]
    assert devices == ["gpu-0", "gpu-1"]
    (warning,) = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert warning.startswith(f"warning: {f}: document 1: DeviceClass a100-listed: spec.selectors[0].cel.")
    assert warning.endswith(
        f"(on create only: the API server lets an object it already holds keep it; {KEEPS_WORKING})"
    )


def test_audit_audits_the_class_and_warns(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(tmp_path, "class.yaml", STORED_CLASS)
    _, out, _ = run(capsys, "audit", "-f", *INVENTORY, f, "-o", "json")
    findings = [x for x in json.loads(out)["findings"] if x["resources"][0]["name"] == "a100-listed"]
    by_rule = {x["rule"]: x for x in findings}
    assert by_rule["invalid-objects"]["result"] == "warn"
    assert KEEPS_WORKING in by_rule["invalid-objects"]["message"]
    assert by_rule["unmatched-selectors"]["result"] == "pass"  # its selector selects the A100s
    assert "undecodable-objects" not in by_rule


def test_privileged_is_refused_by_validate_only_when_asked_and_only_warned_of_by_allocate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = write(tmp_path, "pod.yaml", PRIVILEGED)
    refused = "spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy"
    assert run(capsys, "validate", "-f", f)[:2] == (0, "1 object: 1 valid, 0 invalid (0 problems)\n")
    assert run(capsys, "validate", "-f", f, "--allow-privileged")[0] == 0
    assert run(capsys, "validate", "-f", f, "--allow-privileged=true")[0] == 0
    code, out, _ = run(capsys, "validate", "-f", f, "--allow-privileged=false")
    assert code == 1 and f"{f}: document 1: Pod team-a/plugin: {refused}" in out
    with pytest.raises(SystemExit) as usage:
        main(["validate", "-f", f, "--allow-privileged=sometimes"])
    assert usage.value.code == 2
    assert "--allow-privileged: expected true or false, got 'sometimes'" in capsys.readouterr().err
    code, out, err = run(capsys, "allocate", "-f", *INVENTORY, f, "--allow-privileged=false", "-o", "json")
    assert code == 0 and json.loads(out)["pods"][0]["pod"] == "team-a/plugin"
    assert (
        f"warning: {f}: document 1: Pod team-a/plugin: {refused} (even as stored: the API server refuses "
        "every update that leaves it so)"
    ) in err.splitlines()
    _, out, _ = run(capsys, "audit", "-f", *INVENTORY, f, "--allow-privileged=false", "-o", "json")
    (finding,) = [x for x in json.loads(out)["findings"] if x["rule"] == "invalid-objects"]
    assert refused in finding["message"]


def test_a_suites_state_is_a_cluster_as_it_stands(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The later of two documents naming the same object wins, and a class only the stored
    environment compiles is warned of: the suite runs (neither stopped it before issue 24 ran it:
    the duplicate was a broken suite)."""
    state = tmp_path / "state"
    write(tmp_path, "state/a-classes.yaml", STORED_CLASS.split("---\n")[0])
    write(tmp_path, "state/b-classes.yaml", STORED_CLASS.split("---\n")[0])
    suite = write(
        tmp_path,
        "suite.yaml",
        yaml.safe_dump(
            {
                "name": "stored",
                "state": [str(CLUSTER), str(state)],
                "tests": [
                    {
                        "name": "a claim of the stored class fits",
                        "allocate": {
                            "apiVersion": "resource.k8s.io/v1",
                            "kind": "ResourceClaim",
                            "metadata": {"name": "c", "namespace": "team-a"},
                            "spec": {
                                "devices": {
                                    "requests": [{"name": "g", "exactly": {"deviceClassName": "a100-listed"}}]
                                }
                            },
                        },
                        "expectNodes": ["node-1", "node-2"],
                    }
                ],
            }
        ),
    )
    code, out, err = run(capsys, "test", suite)
    assert code == 0, out + err
    lines = err.splitlines()
    assert (
        f"note: {suite}: state: {state}/b-classes.yaml: document 1: DeviceClass a100-listed replaces the one "
        f"in {state}/a-classes.yaml: document 1 (the later document wins, as with kubectl apply)"
    ) in lines
    warned = [line for line in lines if line.startswith(f"warning: {suite}: state: {state}/b-classes.yaml")]
    assert len(warned) == 1 and KEEPS_WORKING in warned[0]


def test_serve_states_warnings_are_said(tmp_path: Path) -> None:
    """What validation says of a document serve --state reads as the offline commands do (here a
    v1beta1 class, converted) is told as a warning; the class is used all the same. A v1 class is
    read as list/watch reads a stored object, not validated at all (the fast path that reads
    100,000 pods), and is used too."""
    older = write(tmp_path, "older/class.yaml", STORED_CLASS.split("---\n")[0].replace("/v1\n", "/v1beta1\n"))
    stored = write(tmp_path, "stored/class.yaml", STORED_CLASS.replace("a100-listed", "a100-stored"))
    said: list[str] = []
    options = ReadOptions(api_versions=RuntimeConfig.parse(["resource.k8s.io/v1beta1"]))
    state = FileState.load([str(CLUSTER), older, stored], datetime.now(UTC), options=options, say=said.append)
    assert {"a100-listed", "a100-stored"} <= set(state.snapshot.classes)
    (warning,) = said
    assert warning.startswith(f"warning: {older}: document 1: DeviceClass a100-listed: spec.selectors[0]")
    assert KEEPS_WORKING in warning


def test_a_second_default_class_a_cluster_holds_is_a_warning_a_pod_it_refuses_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The Priority plugin refuses a second globalDefault class on create, but a cluster may hold one
    (a race of two creates): audit warns of it and audits it. A pod naming a class the cluster lacks
    it refuses outright, so no cluster holds it: an error, in allocate too (issues 24 and 29)."""
    classes = write(tmp_path, "classes.yaml", """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: standard}
value: 100
globalDefault: true
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: cheap}
value: 10
globalDefault: true
""")
    code, out, _ = run(capsys, "audit", "-f", *INVENTORY, classes, "-o", "json")
    findings = json.loads(out)["findings"]
    (warned,) = [f for f in findings if f["rule"] == "invalid-objects"]
    assert warned["result"] == "warn" and warned["resources"][0]["name"] == "cheap"
    assert warned["message"].endswith(
        'priorityclasses.scheduling.k8s.io "cheap" is forbidden: PriorityClass standard is already marked '
        "as default. Only one default can exist (on create only: the API server lets an object it already "
        "holds keep it)"
    )
    assert not any(f["result"] == "error" for f in findings)
    # No image either: what validation says of it is not said, the refusal is the server's whole answer.
    pod = write(
        tmp_path,
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: etl, namespace: team-a}\n"
        "spec: {priorityClassName: nightly, containers: [{name: main}]}\n",
    )
    refused = 'pods "etl" is forbidden: no PriorityClass with name nightly was found'
    code, out, _ = run(capsys, "audit", "-f", *INVENTORY, classes, pod, "-o", "json")
    (error,) = [f for f in json.loads(out)["findings"] if f["resources"][0]["name"] == "etl"]
    assert (error["rule"], error["result"]) == ("undecodable-objects", "error")
    assert refused in error["message"]
    code, out, err = run(capsys, "allocate", "-f", *INVENTORY, classes, pod)
    assert (code, out) == (2, "") and f"Pod team-a/etl: {refused}" in err
