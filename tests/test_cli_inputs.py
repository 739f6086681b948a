"""Inputs as kubectl takes them, the same in every command (issue 15): ``-f`` repeatable with several
paths, ``-f -``, ``-R``, every document accounted for, one broken file one error, duplicates,
older versions, workloads, and the commands agreeing with each other."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "gpu-cluster"

TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: team-a}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: inference, namespace: team-a}
spec:
  replicas: 3
  selector: {matchLabels: {app: inference}}
  template:
    metadata: {labels: {app: inference}}
    spec:
      containers:
      - name: server
        image: registry.example.com/inference:1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: one-gpu}
"""

CUSTOM = """\
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: domain}
spec: {numNodes: 2}
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_stdin_is_a_file_named_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(TEMPLATE))
    code, out, _ = run(capsys, "validate", "-f", "-")
    assert (code, out) == (0, "1 object: 1 valid, 0 invalid (0 problems)\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("kind: [\n"))
    code, _, err = run(capsys, "validate", "-f", "-")
    assert code == 2 and "error: <stdin>: not valid YAML or JSON" in err


def test_directories_are_read_recursively_only_with_r(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write(tmp_path, "top.yaml", TEMPLATE)
    write(tmp_path, "nested/deeper/deployment.yaml", DEPLOYMENT)
    assert run(capsys, "validate", "-f", str(tmp_path))[1].endswith(
        "1 object: 1 valid, 0 invalid (0 problems)\n"
    )
    assert run(capsys, "validate", "-R", "-f", str(tmp_path))[1].endswith(
        "2 objects: 2 valid, 0 invalid (0 problems)\n"
    )


def test_every_command_takes_several_paths_per_f(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    claims = write(tmp_path, "deployment.yaml", TEMPLATE + "---\n" + DEPLOYMENT)
    files = [str(CLUSTER / f) for f in ("classes.yaml", "nodes.yaml", "slices.yaml")]
    code, out, err = run(capsys, "allocate", "-f", *files, "-f", claims, "-o", "json")
    assert code == 0, err
    assert "Deployment team-a/inference: allocating one pod of its template (spec.template)" in err
    assert any(node["fits"] for node in json.loads(out)["pods"][0]["nodes"])
    code, out, err = run(capsys, "audit", "-f", *files, claims)
    assert code == 0, err
    assert "skipped 1 Deployment document: a workload" in err


def test_other_kinds_get_one_note_per_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(
        tmp_path, "mixed.yaml", "---\n".join([CUSTOM, CUSTOM.replace("name: domain", "name: d2"), TEMPLATE])
    )
    code, out, err = run(capsys, "validate", "-f", f)
    assert (code, out) == (0, "3 objects: 3 valid, 0 invalid (0 problems)\n")
    assert err.splitlines() == [
        "note: 2 ComputeDomain documents: only the metadata checked, a custom resource (--skip-kinds "
        "ComputeDomain to skip them silently, --strict-kinds to make them errors)"
    ]
    code, out, err = run(capsys, "validate", "-f", f, "--skip-kinds", "ComputeDomain")
    assert (code, out, err) == (0, "1 object: 1 valid, 0 invalid (0 problems)\n", "")
    code, out, _ = run(capsys, "validate", "-f", f, "--strict-kinds")
    assert code == 1 and 'kind: Unsupported value: "ComputeDomain": a custom resource (--strict-kinds)' in out


OTHER_KINDS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: resourceslices-policy-{{ include "gpu-driver.fullname" . }}
spec: {}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:gpu-driver_reader
---
apiVersion: v1
kind: Service
metadata:
  name: gpu.driver.metrics
  namespace: gpu-operator
---
apiVersion: v1
kind: ConfigMap
metadata:
  generateName: Driver-Config-
  namespace: gpu-operator
  labels: {app.kubernetes.io/name: "gpu driver"}
---
apiVersion: gpu.example.com/v1alpha1
kind: GpuConfig
metadata:
  name: shared_time_slicing
  namespace: gpu-operator
"""


def test_the_metadata_of_other_kinds_is_validated_by_the_kinds_rules(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every kind's metadata is validated as the API server validates any object's: the name by
    the kind's own rule (an RBAC role's is a path segment, a Service's a DNS label, a custom
    resource's a DNS subdomain), generateName likewise, labels; the kind's spec is not looked at."""
    f = write(tmp_path, "other.yaml", OTHER_KINDS)
    code, out, _ = run(capsys, "validate", "-f", f)
    assert code == 1
    lines = out.splitlines()
    assert lines[-1] == "5 objects: 1 valid, 4 invalid (5 problems)"
    by_document = {line.split(": ")[1]: line.split(": ", 3)[3] for line in lines[:-1]}
    assert by_document["document 1"].startswith(
        'metadata.name: Invalid value: "resourceslices-policy-{{ include \\"gpu-driver.fullname\\" . }}": '
        "a lowercase RFC 1123 subdomain must consist of"
    )
    assert "document 2" not in by_document  # "system:gpu-driver_reader" is a fine path segment
    assert (
        by_document["document 3"]
        == 'metadata.name: Invalid value: "gpu.driver.metrics": must not contain dots'
    )
    assert [
        line.split(": Invalid value: ")[0].split(": ", 3)[3] for line in lines if "document 4" in line
    ] == [
        "metadata.generateName",
        "metadata.labels",
    ]
    assert by_document["document 5"].startswith(
        'metadata.name: Invalid value: "shared_time_slicing": a lowercase'
    )


def test_the_same_object_twice_is_a_warning_in_validate_and_the_later_one_elsewhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """kubectl apply of both applies both, the second as an update of the first: validate warns,
    naming both places; the commands that describe one cluster keep the later document, as the
    cluster would, and say so naming both places."""
    a = write(tmp_path, "a.yaml", TEMPLATE)
    b = write(tmp_path, "b.yaml", TEMPLATE.replace("gpu.example.com", "nic.example.com"))
    code, out, _ = run(capsys, "validate", "-f", a, b)
    assert code == 0
    assert out.splitlines() == [
        f"{b}: document 1: ResourceClaimTemplate team-a/one-gpu: warning: the same ResourceClaimTemplate is "
        f"also in {a}: document 1: kubectl apply applies both, this one as an update of that one",
        "2 objects: 2 valid, 0 invalid (0 problems, 1 warning)",
    ]
    note = (
        f"note: {b}: document 1: ResourceClaimTemplate team-a/one-gpu replaces the one in {a}: document 1 "
        "(the later document wins, as with kubectl apply)"
    )
    deployment = write(tmp_path, "deployment.yaml", DEPLOYMENT)
    code, out, err = run(capsys, "allocate", "-f", str(CLUSTER), a, b, deployment, "-o", "json")
    assert code == 1 and note in err.splitlines()
    # The later template asks for a NIC class the cluster has no device of: nothing fits.
    (pod,) = json.loads(out)["pods"]
    assert not pod["fits"] and "nic.example.com" in pod["message"]
    code, out, err = run(capsys, "allocate", "-f", str(CLUSTER), b, a, deployment, "-o", "json")
    assert code == 0 and note.replace(a, "A").replace(b, a).replace("A", b) in err.splitlines()
    code, out, err = run(capsys, "audit", "-f", str(CLUSTER), a, b, "-o", "json")
    assert note in err.splitlines()
    audited = [f["resources"][0]["name"] for f in json.loads(out)["findings"] if f["rule"] == "selectors"]
    assert audited.count("one-gpu") == 1


def test_a_duplicate_key_is_a_duplicate_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(
        tmp_path,
        "dup.yaml",
        TEMPLATE.replace(
            "metadata: {name: one-gpu, namespace: team-a}",
            "metadata: {name: one-gpu, namespace: team-a, name: two}",
        ),
    )
    code, out, _ = run(capsys, "validate", "-f", f)
    assert code == 1 and 'duplicate field "metadata.name"' in out
    j = write(
        tmp_path,
        "dup.json",
        '{"apiVersion": "v1", "kind": "Namespace", "kind": "Namespace", "metadata": {"name": "a"}}',
    )
    code, out, _ = run(capsys, "validate", "-f", j)
    assert code == 1 and 'duplicate field "kind"' in out


def test_older_versions_through_every_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    old = write(
        tmp_path,
        "v1beta1.yaml",
        yaml.safe_dump(
            {
                "apiVersion": "resource.k8s.io/v1beta1",
                "kind": "ResourceClaim",
                "metadata": {"name": "old-style", "namespace": "team-a"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "deviceClassName": "gpu.example.com", "count": 1}]
                    }
                },
            }
        ),
    )
    code, out, _ = run(capsys, "validate", "-f", old)
    assert code == 1 and "not served by default by Kubernetes 1.36 since resource.k8s.io/v1 went GA" in out
    flag = ("--api-versions", "resource.k8s.io/v1beta1")
    assert run(capsys, "validate", "-f", old, *flag)[0] == 0
    code, out, err = run(capsys, "allocate", "-f", str(CLUSTER), old, *flag, "-o", "json")
    assert code == 0, err
    assert run(capsys, "audit", "-f", str(CLUSTER), old, *flag)[0] == 0
    code, out, _ = run(capsys, "convert", "-f", old)
    assert code == 0
    assert yaml.safe_load(out)["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}
    ]
    code, _, err = run(capsys, "validate", "-f", old, "--api-versions", "resource.k8s.io/v9")
    assert code == 2 and "--api-versions resource.k8s.io/v9: Kubernetes 1.36 has no group version" in err


def test_api_versions_takes_runtime_config_entries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The one entry a 1.36 server needs for DeviceTaintRule serves DeviceTaintRule only: a v1beta2
    DeviceClass stays refused, in kubectl's words, with the entry that would serve it."""
    rule = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-gpu-0"},
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
            "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
        },
    }
    device_class = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
    }
    f = write(tmp_path, "v1beta2.yaml", yaml.safe_dump_all([rule, device_class]))
    entry = "resource.k8s.io/v1beta2/devicetaintrules=true"
    code, out, _ = run(capsys, "validate", "-f", f, "--api-versions", entry)
    assert code == 1
    (line,) = [line for line in out.splitlines() if "DeviceClass" in line]
    assert line == (
        f"{f}: document 2: DeviceClass gpu.example.com: apiVersion: Unsupported value: "
        '"resource.k8s.io/v1beta2": no matches for kind "DeviceClass" in version "resource.k8s.io/v1beta2": '
        f"--api-versions {entry} serves only devicetaintrules of it (add "
        "resource.k8s.io/v1beta2/deviceclasses=true if your API server serves it)"
    )
    both = f"{entry},resource.k8s.io/v1beta2/deviceclasses=true"
    assert run(capsys, "validate", "-f", f, "--api-versions", both)[0] == 0
    assert run(capsys, "validate", "-f", f, "--api-versions", "resource.k8s.io/v1beta2")[0] == 0
    turned_off = "resource.k8s.io/v1beta2,resource.k8s.io/v1beta2/deviceclasses=false"
    code, out, _ = run(capsys, "validate", "-f", f, "--api-versions", turned_off)
    assert code == 1 and f"--api-versions {turned_off} turns it off" in out
    code, _, err = run(capsys, "validate", "-f", f, "--api-versions", "resource.k8s.io/v1beta2/DeviceClasses")
    assert code == 2 and "resource is always lowercase plural" in err


def test_allocate_and_audit_warn_of_what_validate_refuses_in_existing_objects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The commands that read a cluster as it stands never refuse to answer for an object the
    cluster holds: validate's refusal is their warning, saying whether the API server would refuse
    even an unchanged update (a template's spec is validated again on every update)."""
    bad = write(
        tmp_path,
        "bad.yaml",
        TEMPLATE.replace(
            "exactly: {deviceClassName: gpu.example.com}",
            "exactly: {deviceClassName: gpu.example.com, count: -1}",
        ),
    )
    code, validated, _ = run(capsys, "validate", "-f", bad)
    problem = validated.splitlines()[0].split(": ResourceClaimTemplate team-a/one-gpu: ")[1]
    assert code == 1 and problem.startswith("spec.spec.devices.requests[0].exactly.count: Invalid value: -1")
    code, out, err = run(capsys, "allocate", "-f", str(CLUSTER), bad)
    assert code in (0, 1) and out
    warning = (
        f"warning: {bad}: document 1: ResourceClaimTemplate team-a/one-gpu: {problem} (even as stored: the "
        "API server refuses every update that leaves it so)"
    )
    assert warning in err.splitlines()
    code, out, _ = run(capsys, "audit", "-f", str(CLUSTER), bad, "-o", "json")
    (finding,) = [f for f in json.loads(out)["findings"] if f["rule"] == "invalid-objects"]
    assert finding["result"] == "warn"
    assert finding["message"] == (
        f"ResourceClaimTemplate team-a/one-gpu: the API server's validation says: {bad}: document 1: "
        f"{problem} (even as stored: the API server refuses every update that leaves it so)"
    )


def test_a_created_object_is_judged_without_its_status(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team-a"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "nope", "driver": "NOT A DRIVER", "pool": "p", "device": "d"}]
                }
            }
        },
    }
    f = write(tmp_path, "claim.yaml", yaml.safe_dump(claim))
    assert run(capsys, "validate", "-f", f)[0] == 0  # the API server drops it and accepts the claim
    claim["status"]["allocation"]["devices"]["results"][0]["bogus"] = 1
    write(tmp_path, "claim.yaml", yaml.safe_dump(claim))
    code, out, _ = run(capsys, "validate", "-f", f)  # strict decoding still sees the whole body
    assert code == 1 and 'unknown field "status.allocation.devices.results[0].bogus"' in out


def test_validate_with_slices_warns_as_audit_does(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    typo = write(
        tmp_path,
        "typo.yaml",
        TEMPLATE.replace(
            "exactly: {deviceClassName: gpu.example.com}",
            "exactly: {deviceClassName: gpu.example.com, selectors: [{cel: {expression: "
            "\"device.attributes['gpu.example.com'].modle == 'a100'\"}}]}",
        ),
    )
    code, out, _ = run(capsys, "validate", "-f", str(CLUSTER), typo)
    assert code == 0
    misspelled, failing = [line for line in out.splitlines() if ": warning: " in line]
    assert misspelled.startswith(f"{typo}: document 1: ResourceClaimTemplate team-a/one-gpu: warning: ")
    assert 'did you mean "gpu.example.com/model"?' in misspelled
    assert "fails on 10 of the 10 devices" in failing
    code, audited, _ = run(capsys, "audit", "-f", str(CLUSTER), typo)
    assert 'did you mean "gpu.example.com/model"?' in audited
    # Failing on every device, no pod using the template can ever be scheduled: a failure in audit.
    (row,) = [line for line in audited.splitlines() if line.split()[:2] == ["fail", "unmatched-selectors"]]
    assert "its selectors fail on every device" in row and code == 1
    assert run(capsys, "validate", "-f", str(CLUSTER), typo, "--strict")[0] == 1
    alone = run(capsys, "validate", "-f", typo)  # no cluster to compare with: nothing to warn about
    assert alone[:2] == (0, "1 object: 1 valid, 0 invalid (0 problems)\n")


def test_audit_of_nothing_is_unusable_input_as_for_validate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    empty = write(tmp_path, "empty.yaml", "")
    for command in ("validate", "audit", "allocate"):
        code, out, err = run(capsys, command, "-f", empty)
        assert (code, out) == (2, ""), command
        assert f"no objects found in {empty}" in err, command


def test_one_broken_file_in_audit_is_one_error_finding(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    helm = write(tmp_path, "templates/claim.yaml", "metadata:\n  name: {{ .Release.Name }}\n")
    code, out, _ = run(capsys, "audit", "-f", str(CLUSTER), helm)
    assert code == 1
    assert f"{helm}: not valid YAML or JSON" in out and "helm template" in out


def test_convert_refuses_what_it_cannot_convert(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """kubectl convert's answer to a document that is no object, or to a version nothing converts
    from: an error naming it (here with what replaced classic DRA), not the document printed back
    as if it were fine."""
    classic = "apiVersion: resource.k8s.io/v1alpha2\nkind: ResourceClaim\nmetadata: {name: c}\n"
    files = write(tmp_path, "classic.yaml", f"{classic}---\n- not\n- an object\n---\n{TEMPLATE}")
    code, out, err = run(capsys, "convert", "-f", files)
    assert code == 1
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["ResourceClaimTemplate"]
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert 'document 1: ResourceClaim c: apiVersion: Unsupported value: "resource.k8s.io/v1alpha2"' in err
    assert "document 2: <no kind> <no name>: <root>: Invalid value" in lines[1]


TAINT_RULE = """\
apiVersion: resource.k8s.io/{version}
kind: DeviceTaintRule
metadata: {{name: gpu-maintenance}}
spec:
  deviceSelector: {{driver: gpu.example.com, pool: node-1}}
  taint: {{key: example.com/maintenance, effect: NoSchedule}}
"""


def test_convert_prints_a_v1beta2_taint_rule_as_it_is_and_converts_the_rest_of_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """1.36 serves DeviceTaintRule only as v1beta2: there is nothing to convert it to, so it is
    printed unchanged (it was a traceback, and nothing of the file was printed); a v1alpha3 one
    becomes v1beta2."""
    older_class = "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec: {}\n"
    alpha = TAINT_RULE.format(version="v1alpha3").replace("gpu-maintenance", "gpu-repair")
    beta = TAINT_RULE.format(version="v1beta2")
    files = write(tmp_path, "rules.yaml", "---\n".join([beta, older_class, alpha]))
    code, out, err = run(capsys, "convert", "-f", files)
    assert (code, err) == (0, "")
    assert [(d["apiVersion"], d["kind"]) for d in yaml.safe_load_all(out)] == [
        ("resource.k8s.io/v1beta2", "DeviceTaintRule"),
        ("resource.k8s.io/v1", "DeviceClass"),
        ("resource.k8s.io/v1beta2", "DeviceTaintRule"),
    ]


def test_convert_reads_every_document_as_the_other_commands_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A misspelt field (in any kind, not only the converted ones) and a kind 1.36 does not serve
    are refused as validate refuses them, and only the rest is printed; the same object twice is
    printed twice with validate's warning, as kubectl apply applies both."""
    misspelt_pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeNme: n, containers: []}\n"
    old_deployment = "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n"
    older = "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec: {}\n"
    again = older.replace("v1beta1", "v1")
    documents = [misspelt_pod, old_deployment, older, again, TEMPLATE]
    files = write(tmp_path, "mixed.yaml", "---\n".join(documents))
    code, out, err = run(capsys, "convert", "-f", files)
    assert code == 1
    assert [(d["kind"], d["apiVersion"]) for d in yaml.safe_load_all(out)] == [
        ("DeviceClass", "resource.k8s.io/v1"),
        ("DeviceClass", "resource.k8s.io/v1"),
        ("ResourceClaimTemplate", "resource.k8s.io/v1"),
    ]
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert lines[0].endswith('Pod p: unknown field "spec.nodeNme": did you mean "nodeName"?')
    assert "Deployment d: apiVersion: Unsupported value: \"extensions/v1beta1\"" in lines[1]
    assert lines[2].startswith("warning: ")
    assert "document 4: DeviceClass gpu: the same DeviceClass is also in" in lines[2]


def test_convert_shows_its_progress_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Like every command that can run long (a big List converted object by object)."""
    from webhook.commands import convert

    bars: list[tuple[int, int]] = []

    class Seen(convert.Progress):
        def __call__(self, done: int, total: int) -> None:
            bars.append((done, total))

    monkeypatch.setattr(convert, "Progress", Seen)
    files = write(tmp_path, "two.yaml", f"{TEMPLATE}---\n{CUSTOM}")
    assert run(capsys, "convert", "-f", files)[0] == 0
    assert bars == [(1, 2), (2, 2)]


def test_a_directory_whose_manifests_are_all_in_subdirectories_says_to_pass_r(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "cluster/gpus/classes.yaml", (ROOT / "examples/gpu-cluster/classes.yaml").read_text())
    code, _, err = run(capsys, "validate", "-f", str(tmp_path / "cluster"))
    assert code == 2
    assert err.strip() == (
        f"error: {tmp_path / 'cluster'}: a directory with no .yaml, .yml or .json files; its "
        "subdirectories have some: pass -R (--recursive) to read them, as kubectl does"
    )
    assert run(capsys, "validate", "-R", "-f", str(tmp_path / "cluster"))[0] == 0
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    assert run(capsys, "validate", "-f", str(tmp_path / "empty"))[2].strip().endswith(".json files")
