"""Versioned output (issue 24): every ``-o json|yaml`` document and the dry run's answer carry an
``apiVersion`` and a ``kind``, match the JSON Schema published for that version of the kind in
``schemas/``, which is generated from the pydantic models, and the changelog states the version.
Issue 27's ``draguard.io/v1alpha2`` of ValidateReport and DryRunAnswer is printed by default; the
first shape stays selectable with ``--output-version``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from policies.outputs import API_VERSION, API_VERSION_2
from webhook import schemas
from webhook.cli import main

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "examples" / "workloads"
CLUSTER = ROOT / "examples" / "gpu-cluster"
SUITES = ROOT / "examples" / "policy-tests"

# An object with problems, one of another kind (metadata only), one with a warning: every field used.
MIXED = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: big, namespace: team-a}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, count: -1}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: Driver_Config, namespace: team-a}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: big, namespace: team-a}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
"""


def published(kind: str, version: str = API_VERSION) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((schemas.DIRECTORY / version / f"{kind}.json").read_text())
    return found


def test_the_published_schemas_are_the_models() -> None:
    assert schemas.stale() == [], "run python -m webhook.schemas (and state the change in CHANGELOG.md)"
    for model in schemas.DOCUMENTS:
        version = schemas.version_of(model)
        schema = published(schemas.kind_of(model), version)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["required"][:2] == ["apiVersion", "kind"]
        assert schema["properties"]["apiVersion"]["const"] == version
    published_files = {f"{p.parent.name}/{p.stem}" for p in schemas.DIRECTORY.glob("*/*/*.json")}
    models = {f"{schemas.version_of(m).split('/')[1]}/{schemas.kind_of(m)}" for m in schemas.DOCUMENTS}
    assert published_files == models, "a published schema without its model, or the reverse"


def test_a_stale_schema_is_found(tmp_path: Path) -> None:
    for model in schemas.DOCUMENTS:
        schemas.path(model, tmp_path).parent.mkdir(parents=True, exist_ok=True)
        schemas.path(model, tmp_path).write_text(schemas.text(model))
    assert schemas.stale(tmp_path) == []
    v1alpha1 = tmp_path / API_VERSION
    (v1alpha1 / "AuditReport.json").write_text(schemas.text(schemas.DOCUMENTS[0]))
    (v1alpha1 / "TestReport.json").unlink()
    (tmp_path / API_VERSION_2 / "DryRunAnswer.json").write_text(schemas.text(schemas.DOCUMENTS[0]))
    assert schemas.stale(tmp_path) == [
        f"{API_VERSION_2}/DryRunAnswer",
        f"{API_VERSION}/AuditReport",
        f"{API_VERSION}/TestReport",
    ]


def test_the_changelog_states_every_version_and_its_kinds() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for model in schemas.DOCUMENTS:
        section = changelog.split(f"\n## {schemas.version_of(model)}\n", 1)[1].split("\n## ", 1)[0]
        assert f"`{schemas.kind_of(model)}`" in section, schemas.version_of(model)


VALIDATE = ["validate", "-f", str(CLUSTER), "-f", "{mixed}"]
ALLOCATE = ["allocate", "-f", str(CLUSTER)]
OLDER = ["--output-version", API_VERSION]
COMMANDS = [
    ("ValidateReport", API_VERSION_2, VALIDATE),
    ("ValidateReport", API_VERSION, VALIDATE + OLDER),
    ("DryRunAnswer", API_VERSION_2, ALLOCATE),
    ("DryRunAnswer", API_VERSION, ALLOCATE + OLDER),
    ("AuditReport", API_VERSION, ["audit", "-f", str(CLUSTER), "-f", "{mixed}"]),
    ("TestReport", API_VERSION, ["test", str(SUITES)]),
    ("DeviceAvailability", API_VERSION, ["devices", "-f", str(CLUSTER)]),
    ("HeadroomAnswer", API_VERSION, ["headroom", "-f", str(CLUSTER), "-f", str(WORKLOADS)]),
]


def printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], output: str
) -> dict[str, Any]:
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(MIXED)
    main([arg.format(mixed=mixed) for arg in argv] + ["-o", output])
    out = capsys.readouterr().out
    document: dict[str, Any] = json.loads(out) if output == "json" else yaml.safe_load(out)
    return document


@pytest.mark.parametrize(("kind", "version", "argv"), COMMANDS)
@pytest.mark.parametrize("output", ["json", "yaml"])
def test_every_document_is_versioned_and_matches_its_schema(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str, version: str, argv: list[str], output: str
) -> None:
    document = printed(capsys, tmp_path, argv, output)
    assert list(document)[:2] == ["apiVersion", "kind"]
    assert (document["apiVersion"], document["kind"]) == (version, kind)
    jsonschema.Draft202012Validator(published(kind, version)).validate(document)


def test_the_second_version_says_what_the_first_cannot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """v1alpha2 is v1alpha1 with ``update`` on each validated object and the answer's ``sources``;
    a v1alpha2 document is no v1alpha1 document (the old schema refuses the new keys), and the same
    run printed as v1alpha1 has everything else the same."""
    for kind, argv in (("ValidateReport", VALIDATE), ("DryRunAnswer", ALLOCATE)):
        newer = printed(capsys, tmp_path, argv, "json")
        older = printed(capsys, tmp_path, argv + OLDER, "json")
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(published(kind)).validate({**newer, "apiVersion": API_VERSION})
        if kind == "ValidateReport":
            assert [o.pop("update") for o in newer["objects"]] == [False] * len(newer["objects"])
        else:
            files = newer.pop("sources")["files"]
            assert {f["name"] for f in files} >= {"team-a/three-a100", "gpu.example.com"}
            assert not any(f["replaces"] for f in files)
        assert {**newer, "apiVersion": API_VERSION} == older


def test_a_document_of_another_shape_does_not_match() -> None:
    """The schemas are strict enough to catch a changed shape (issue 17 moved allocate's nodes
    into pods[]: a document of the old shape must not pass as v1alpha1)."""
    old_allocate = {"apiVersion": API_VERSION, "kind": "DryRunAnswer", "nodes": [], "features": []}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(published("DryRunAnswer")).validate(old_allocate)
    unversioned = {"objects": [], "unreadable": [], "summary": {}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(published("ValidateReport")).validate(unversioned)
