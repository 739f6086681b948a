"""``draguard test`` end to end: the shipped example suites, a failing suite, a broken one, JUnit."""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SUITES = EXAMPLES / "policy-tests"
SHIPPED = [SUITES / "draguard-test.yaml", SUITES / "strict-cluster.yaml"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["test", *args])
    out, err = capsys.readouterr()
    return code, out, err


def count_tests(*files: Path) -> int:
    return sum(len(yaml.safe_load(f.read_text())["tests"]) for f in files)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


FAILING = f"""\
name: failing
state: [{EXAMPLES / "gpu-cluster"}]
tests:
- name: pinned pod refused
  operation: CREATE
  object: pod.yaml
  expect: deny
  messageContains: is not allocated
- name: pinned pod wrongly expected to pass
  operation: CREATE
  object: pod.yaml
  expect: allow
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: team-a}
spec:
  nodeName: node-2
  resourceClaims: [{name: gpus, resourceClaimName: three-a100}]
  containers: [{name: main}]
"""


@pytest.fixture
def failing(tmp_path: Path) -> Path:
    write(tmp_path, "pod.yaml", POD)
    return write(tmp_path, "failing.yaml", FAILING)


def test_the_shipped_examples_pass(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(SUITES))
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["SUITE", "TEST", "RESULT"]
    rows = lines[1:-1]
    assert len(rows) == count_tests(*SHIPPED)
    assert all(re.split(r"\s{2,}", row)[2] == "pass" for row in rows)
    assert {row.split()[0] for row in rows} == {"gpu-policies", "strict-cluster"}
    assert lines[-1] == f"{count_tests(*SHIPPED)} passed, 0 failed"


def test_a_failing_test_is_shown_with_what_was_expected(
    capsys: pytest.CaptureFixture[str], failing: Path
) -> None:
    code, out, _ = run(capsys, str(failing))
    assert code == 1
    lines = out.splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    row = next(line for line in lines if line.startswith("failing  pinned pod wrongly"))
    cells = re.split(r"\s{2,}", row)
    assert cells[2] == "FAIL"
    assert cells[3].startswith("expected allowed, got denied: pod team-a/pinned")
    detail = lines[lines.index(f"FAIL failing / pinned pod wrongly expected to pass ({failing})") + 1]
    assert detail.startswith("  expected allowed, got denied: pod team-a/pinned sets spec.nodeName node-2")
    assert detail.endswith("so that the scheduler allocates the devices")  # in full, not cut


def test_json_output(capsys: pytest.CaptureFixture[str], failing: Path) -> None:
    code, out, _ = run(capsys, str(failing), "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert list(doc) == ["apiVersion", "kind", "suites", "passed", "failed"]
    assert (doc["apiVersion"], doc["kind"]) == ("draguard.io/v1alpha1", "TestReport")
    assert (doc["passed"], doc["failed"]) == (1, 1)
    (suite,) = doc["suites"]
    assert (suite["name"], suite["file"], suite["passed"], suite["failed"]) == ("failing", str(failing), 1, 1)
    refused, wrong = suite["tests"]
    assert list(refused) == ["name", "result", "reason", "actual"]
    assert (refused["result"], wrong["result"]) == ("pass", "fail")
    assert wrong["actual"]["allowed"] is False
    assert [o["rule"] for o in wrong["actual"]["outcomes"]] == ["prescheduled"]


def test_junit_report_counts_every_suite(
    capsys: pytest.CaptureFixture[str], failing: Path, tmp_path: Path
) -> None:
    report = tmp_path / "out" / "junit.xml"
    report.parent.mkdir()
    code, _, _ = run(capsys, str(SUITES), str(failing), "--junit", str(report))
    assert code == 1
    root = ET.parse(report).getroot()
    total = count_tests(*SHIPPED) + 2
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (str(total), "1", "0")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"gpu-policies", "strict-cluster", "failing"}
    assert suites["failing"].get("tests") == "2" and suites["failing"].get("failures") == "1"
    assert suites["gpu-policies"].get("failures") == "0"
    assert len(list(suites["strict-cluster"].iter("testcase"))) == count_tests(SUITES / "strict-cluster.yaml")
    (failure,) = root.iter("failure")
    assert (failure.get("message") or "").startswith("expected allowed, got denied")


def test_a_broken_suite_names_the_file_and_the_field_and_runs_nothing(
    capsys: pytest.CaptureFixture[str], failing: Path, tmp_path: Path
) -> None:
    broken = write(tmp_path, "broken/draguard-test.yaml", """\
        name: broken
        tests:
        - name: typo
          operation: CREATE
          object: ../pod.yaml
          expect: denied
          messageContain: x
        - name: missing file
          operation: CREATE
          object: nope.yaml
          expect: deny
    """)
    code, out, err = run(capsys, str(failing), str(broken))
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert f"error: {broken}: tests[0].expect: Invalid value: 'denied': Input should be 'allow', 'deny' or " \
        "'warn'" in lines
    assert f"error: {broken}: tests[0].messageContain: unknown field; did you mean messageContains?" in lines


def test_a_missing_object_file_is_a_broken_suite(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    suite = write(tmp_path, "s.yaml", """\
        name: s
        tests:
        - {name: t, operation: CREATE, object: nope.yaml, expect: deny}
    """)
    code, _, err = run(capsys, str(suite))
    assert code == 2
    assert err == f"error: {suite}: tests[0].object: {tmp_path / 'nope.yaml'}: no such file or directory\n"


def test_a_directory_holds_suites_among_other_yaml(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write(tmp_path, "cluster/nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n")
    write(tmp_path, "a/policies.yaml", f"name: a\nstate: [../cluster]\ntests:\n{ALLOW_CLASS}")
    write(tmp_path, "b/draguard-test.yaml", f"name: b\nstate: [../cluster]\ntests:\n{ALLOW_CLASS}")
    code, out, err = run(capsys, str(tmp_path))
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["a", "b"]


ALLOW_CLASS = """\
- name: class
  operation: CREATE
  object: {apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {name: c}}
  userInfo: {username: admin, groups: [system:masters]}
  expect: allow
"""


def test_paths_without_suites_are_unusable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope"))
    assert (code, err) == (2, f"error: {tmp_path / 'nope'}: no such file or directory\n")
    code, _, err = run(capsys, str(EXAMPLES / "gpu-cluster"))
    assert code == 2 and "no test suites here" in err


def test_a_suite_error_names_each_file_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The suite file's own YAML error names it once; a state file's error names the suite, the
    field (state) and the state file, each once."""
    unreadable = write(tmp_path, "broken.yaml", "name: x\ntests: [\n")
    code, _, err = run(capsys, str(unreadable))
    assert code == 2 and err.count(str(unreadable)) == 1, err
    assert err.startswith(f"error: {unreadable}: not valid YAML or JSON")
    write(tmp_path, "state/pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeNme: x}\n")
    suite = write(tmp_path, "s.yaml", """\
        name: s
        state: [state]
        tests:
        - name: t
          operation: CREATE
          object: {apiVersion: v1, kind: Namespace, metadata: {name: a}}
          expect: allow
    """)
    code, _, err = run(capsys, str(suite))
    state_file = tmp_path / "state" / "pod.yaml"
    assert (code, err) == (
        2,
        f'error: {suite}: state: {state_file}: document 1: Pod p: unknown field "spec.nodeNme": '
        'did you mean "nodeName"?\n',
    )


def test_a_pod_the_api_server_refuses_before_any_webhook_is_a_broken_suite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The Priority admission plugin runs before the webhooks: a pod it refuses never reaches a rule,
    so a test of one would pass or fail for nothing. Pods of the state and of an allocation test are
    created by the same server."""
    write(tmp_path, "state/classes.yaml", """\
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: batch}
        value: 100
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: etl, namespace: team-a}
        spec: {priorityClassName: nightly, containers: [{name: main}]}
    """)
    suite = write(tmp_path, "s.yaml", f"""\
        name: s
        state: [{tmp_path / "state"}]
        tests:
        - name: a pod of an unknown class
          operation: CREATE
          object: {{apiVersion: v1, kind: Pod, metadata: {{name: train, namespace: team-a}},
                   spec: {{priorityClassName: trianing, containers: [{{name: main}}]}}}}
          expect: allow
        - name: a pod of a known class
          operation: CREATE
          object: {{apiVersion: v1, kind: Pod, metadata: {{name: report, namespace: team-a}},
                   spec: {{priorityClassName: batch, priority: 5, containers: [{{name: main}}]}}}}
          expect: allow
    """)
    code, out, err = run(capsys, str(suite))
    assert (code, out) == (2, "")
    classes = "the PriorityClasses are batch, system-cluster-critical, system-node-critical"
    refused = f"error: {suite}: tests[{{}}].object: refused before any webhook is called: pods"
    assert err.splitlines() == [
        f'error: {suite}: state: pods "etl" is forbidden: no PriorityClass with name nightly was found '
        f"({classes})",
        f'{refused.format(0)} "train" is forbidden: no PriorityClass with name trianing was found '
        f"({classes})",
        f'{refused.format(1)} "report" is forbidden: the integer value of priority (5) must not be provided '
        "in pod spec; priority admission controller computed 100 from the given PriorityClass name",
    ]
