"""``draguard validate``: output lines, summary and exit codes 0 (valid), 1 (invalid), 2 (unreadable)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from policies.validation import documents
from webhook.commands import validate as validate_command

ROOT = Path(__file__).resolve().parent.parent

CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: gpus
  namespace: team-a
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        count: {count}
"""

SLICE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """Run the subcommand through argparse as the CLI does; returns code, stdout lines, stderr."""
    parser = argparse.ArgumentParser(prog="draguard")
    validate_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["validate", *argv])
    code = args.func(args)
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_valid_objects_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "ok.yaml", CLAIM.format(count=2) + "---\n" + SLICE)
    code, out, _ = run(capsys, "-f", f)
    assert (code, out) == (0, ["2 objects: 2 valid, 0 invalid (0 problems)"])


def test_example_cluster_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    # examples/policy-tests holds deliberately invalid objects for the policy test suites.
    examples = ROOT / "examples"
    code, out, _ = run(capsys, "-f", str(examples / "gpu-cluster"), "-f", str(examples / "workloads"))
    assert code == 0
    assert out[-1].endswith("invalid (0 problems)")


def test_invalid_object_one_line_per_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(
        tmp_path, "c.yaml", SLICE + "---\n" + CLAIM.format(count=-1).replace("name: gpu\n", "name: GPU\n")
    )
    code, out, _ = run(capsys, "-f", f)
    prefix = f"{f}: document 2: ResourceClaim team-a/gpus: "
    assert code == 1
    assert out == [
        prefix
        + 'spec.devices.requests[0].name: Invalid value: "GPU": a lowercase RFC 1123 label must consist of '
        "lower case alphanumeric characters or '-', and must start and end with an alphanumeric character "
        "(e.g. "
        "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        prefix + "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
        "2 objects: 1 valid, 1 invalid (2 problems)",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\n",
            'ResourceClaim c: apiVersion: Unsupported value: "resource.k8s.io/v1beta1": not served by '
            "default by Kubernetes 1.36 since resource.k8s.io/v1 went GA; write it as resource.k8s.io/v1 "
            "(`draguard convert -f FILE` prints it converted), or pass --api-versions "
            "resource.k8s.io/v1beta1 if your API server serves it (--runtime-config)",
            id="older apiVersion",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n",
            'Widget w: kind: Unsupported value: "Widget": no such kind in v1',
            id="unknown kind of a Kubernetes group",
        ),
        pytest.param(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: "
            "{requests: gpu}}\n",
            'ResourceClaim c: spec.devices.requests: Invalid value: "gpu": must be a list',
            id="string where a list belongs",
        ),
        pytest.param(
            "just text\n",
            '<no kind> <no name>: <root>: Invalid value: "just text": must be an object',
            id="scalar document",
        ),
    ],
)
def test_undecodable_objects_are_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    f = write(tmp_path, "bad.yaml", text)
    code, out, _ = run(capsys, "-f", f)
    assert code == 1
    assert out == [f"{f}: document 1: {problem}", "1 object: 0 valid, 1 invalid (1 problem)"]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param({"bad.yaml": "kind: [unclosed\n"}, "not valid YAML or JSON", id="not YAML"),
        pytest.param({"bad.json": '{"kind": '}, "not valid YAML or JSON", id="not JSON"),
        pytest.param({}, "no such file or directory", id="missing file"),
        pytest.param({"empty.yaml": ""}, "no objects found", id="nothing to validate"),
    ],
)
def test_unreadable_input_exits_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], message: str
) -> None:
    paths = [write(tmp_path, name, text) for name, text in files.items()] or [str(tmp_path / "missing.yaml")]
    code, out, err = run(capsys, "-f", *paths)
    assert (code, out) == (2, [])
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err


def test_unreadable_file_among_good_ones_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One broken file is one error: the others are still checked, the summary counts both, and
    exit 2 is kept for input of which nothing at all could be read."""
    good = write(tmp_path, "good.yaml", SLICE)
    helm = write(tmp_path, "helm.yaml", "kind: {{ .Values.kind }}\n")
    code, out, _ = run(capsys, "-f", good, str(tmp_path / "gone.yaml"), helm)
    assert code == 1
    assert out[0] == f"error: {tmp_path / 'gone.yaml'}: no such file or directory"
    assert out[1].startswith(f"error: {helm}: not valid YAML or JSON")
    assert out[1].endswith("a Helm chart's template must be rendered first (helm template)")
    assert out[2] == "1 object: 1 valid, 0 invalid (0 problems); 2 files could not be read"


def test_directories_and_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sub").mkdir()
    write(
        tmp_path,
        "sub/a.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- " + SLICE.replace("\n", "\n  ").rstrip() + "\n",
    )
    write(
        tmp_path,
        "sub/b.json",
        json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
    )
    assert run(capsys, "-f", str(tmp_path))[0] == 2  # as kubectl: subdirectories only with -R
    code, out, _ = run(capsys, "-R", "-f", str(tmp_path))
    assert (code, out) == (0, ["2 objects: 2 valid, 0 invalid (0 problems)"])


def test_unknown_fields_error_warn_or_ignore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "u.yaml", SLICE.replace("  driver:", "  drvier: x\n  driver:"))
    line = f'{f}: document 1: ResourceSlice node-1: unknown field "spec.drvier": did you mean "driver"?'
    assert run(capsys, "-f", f)[:2] == (1, [line, "1 object: 0 valid, 1 invalid (1 problem)"])
    assert run(capsys, "-f", f, "--unknown-fields", "warn")[:2] == (
        0,
        [
            line.replace("node-1: ", "node-1: warning: "),
            "1 object: 1 valid, 0 invalid (0 problems, 1 warning)",
        ],
    )
    assert run(capsys, "-f", f, "--unknown-fields", "ignore")[:2] == (
        0,
        ["1 object: 1 valid, 0 invalid (0 problems)"],
    )


def test_unknown_fields_stop_validation_like_strict_decoding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubectl's default --validate=strict asks the API server for strict field validation, which
    fails the request while decoding (BadRequest "strict decoding error: unknown field ..."), so the
    validation errors of such an object are never reported; with warn they are."""
    f = write(
        tmp_path,
        "u.yaml",
        SLICE.replace("  driver:", "  drvier: x\n  driver:").replace("nodeName: node-1", "nodeName: Node_1"),
    )
    code, out, _ = run(capsys, "-f", f)
    assert (code, out[0], out[-1]) == (
        1,
        f'{f}: document 1: ResourceSlice node-1: unknown field "spec.drvier": did you mean "driver"?',
        "1 object: 0 valid, 1 invalid (1 problem)",
    )
    code, out, _ = run(capsys, "-f", f, "--unknown-fields", "warn")
    assert code == 1 and any("spec.nodeName: Invalid value" in line for line in out)


ADMIN = CLAIM.format(count=1).replace("count: 1", "adminAccess: true")
FORBIDDEN = (
    "spec.devices.requests[0].adminAccess: Forbidden: admin access to devices requires the "
    "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
)


def test_admin_access_uses_namespaces_from_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claim = write(tmp_path, "claim.yaml", ADMIN)
    labelled = write(
        tmp_path,
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  labels: "
        "{resource.kubernetes.io/admin-access: 'true'}\n",
    )
    plain = write(tmp_path, "plain.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")
    assert run(capsys, "-f", claim, labelled)[0] == 0
    code, out, _ = run(capsys, "-f", claim, plain)
    assert code == 1 and out[0] == f"{claim}: document 1: ResourceClaim team-a/gpus: {FORBIDDEN}"


def test_admin_access_with_namespace_labels_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claim = write(tmp_path, "claim.yaml", ADMIN)
    assert (
        run(capsys, "-f", claim, "--namespace-labels", "team-a:resource.kubernetes.io/admin-access=true")[0]
        == 0
    )
    code, out, _ = run(capsys, "-f", claim, "--namespace-labels", "team-a:env=prod")
    assert code == 1 and out[0].endswith(FORBIDDEN)


def test_admin_access_in_an_unknown_namespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = write(tmp_path, "claim.yaml", ADMIN)
    code, out, _ = run(capsys, "-f", claim)
    assert code == 1
    assert out[0].endswith(
        "spec.devices.requests[0].adminAccess: Internal error: could not retrieve namespace to "
        "verify "
        'admin access: labels of namespace "team-a" are not known (give them with --namespace-labels '
        "team-a:resource.kubernetes.io/admin-access=true, or put the Namespace in the input)"
    )


@pytest.mark.parametrize("value", ["team-a", ":a=b", "team-a:novalue"])
def test_bad_namespace_labels_option_exits_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    claim = write(tmp_path, "claim.yaml", CLAIM.format(count=1))
    code, _, err = run(capsys, "-f", claim, "--namespace-labels", value)
    assert code == 2 and err.startswith("error: --namespace-labels")


def test_update_against_old_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write(tmp_path, "old.yaml", CLAIM.format(count=1) + "---\n" + SLICE)
    new = write(
        tmp_path, "new.yaml", CLAIM.format(count=2) + "---\n" + SLICE.replace("driver: gpu", "driver: other")
    )
    code, out, _ = run(capsys, "-f", new, "--old", old)
    assert code == 1
    assert out[0].startswith(f"{new}: document 1: ResourceClaim team-a/gpus: spec: Invalid value: ")
    assert out[0].endswith(": field is immutable")
    assert out[1] == (
        f"{new}: document 2: ResourceSlice node-1: "
        'spec.driver: Invalid value: "other.example.com": field is immutable'
    )
    assert out[2] == "2 objects: 0 valid, 2 invalid (2 problems)"


def test_old_objects_are_matched_by_kind_namespace_and_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(tmp_path, "old.yaml", CLAIM.format(count=1).replace("name: gpus", "name: other"))
    new = write(tmp_path, "new.yaml", CLAIM.format(count=2))
    assert run(capsys, "-f", new, "--old", old)[0] == 0


def test_old_objects_that_cannot_be_read_are_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --old path would silently validate every object as a create instead."""
    new = write(tmp_path, "new.yaml", CLAIM.format(count=2))
    code, out, err = run(capsys, "-f", new, "--old", str(tmp_path / "old.yaml"))
    assert (code, out) == (2, [])
    assert err == f"error: --old: {tmp_path / 'old.yaml'}: no such file or directory\n"


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.yaml", CLAIM.format(count=-1) + "---\n" + SLICE)
    code, out, _ = run(capsys, "-f", f, "-o", "json")
    body = json.loads("\n".join(out))
    assert code == 1
    assert list(body) == ["apiVersion", "kind", "objects", "unreadable", "summary"]
    assert (body["apiVersion"], body["kind"]) == ("draguard.io/v1alpha1", "ValidateReport")
    assert body["summary"] == {
        "objects": 2, "valid": 1, "invalid": 1, "problems": 1, "warnings": 0, "unreadable": 0
    }
    first = body["objects"][0]
    assert list(first) == ["source", "kind", "name", "checked", "valid", "problems", "warnings"]
    assert (first["kind"], first["name"], first["checked"], first["valid"]) == (
        "ResourceClaim",
        "team-a/gpus",
        "object",
        False,
    )
    assert first["problems"] == [
        "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero"
    ]
    assert first["source"] == f"{f}: document 1"


def test_multi_line_problems_stay_under_their_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(
        tmp_path,
        "c.yaml",
        CLAIM.format(count=1).replace(
            "        count: 1", "        selectors:\n        - cel: {expression: 'device.driver =='}"
        ),
    )
    code, out, _ = run(capsys, "-f", f)
    assert code == 1
    assert out[0].startswith(
        f"{f}: document 1: ResourceClaim team-a/gpus: "
        "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "
    )
    assert all(line.startswith(("    ", f)) for line in out[:-1])


def test_a_validation_bug_is_reported_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> list[object]:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(documents, "validate", broken)
    f = write(tmp_path, "s.yaml", SLICE)
    code, out, _ = run(capsys, "-f", f)
    assert code == 1
    assert out[0] == (
        f"{f}: document 1: ResourceSlice node-1: <root>: Internal error: draguard could not validate this "
        "object: ZeroDivisionError('boom')"
    )


def test_a_workload_whose_pods_name_a_missing_class_is_taken_with_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The API server takes the Deployment (it admits pods, not templates); the pods its controller
    makes would be refused, which is worth a warning, and an error with --strict."""
    deployment = write(tmp_path, "serve.yaml", """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, namespace: ml}
spec:
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      priorityClassName: onlien
      containers: [{name: main, image: registry.example.com/serve:1}]
""")
    code, out, _ = run(capsys, "-f", deployment)
    assert code == 0
    assert out[0] == (
        f"{deployment}: document 1: Deployment ml/serve: warning: spec.template: its pods would be refused: "
        "no PriorityClass with name onlien was found (the PriorityClasses are system-cluster-critical, "
        "system-node-critical)"
    )
    code, _, _ = run(capsys, "-f", deployment, "--strict")
    assert code == 1
