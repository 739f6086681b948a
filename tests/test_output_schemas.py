"""Versioned output (issue 24): every ``-o json|yaml`` document and the dry run's answer carry
``apiVersion: draguard.io/v1alpha1`` and a ``kind``, match the JSON Schema published for that kind
in ``schemas/``, which is generated from the pydantic models, and the changelog states the
version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from policies.outputs import API_VERSION
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


def published(kind: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((schemas.DIRECTORY / f"{kind}.json").read_text())
    return found


def test_the_published_schemas_are_the_models() -> None:
    assert schemas.stale() == [], "run python -m webhook.schemas (and state the change in CHANGELOG.md)"
    for model in schemas.DOCUMENTS:
        schema = published(schemas.kind_of(model))
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["required"][:2] == ["apiVersion", "kind"]
        assert schema["properties"]["apiVersion"]["const"] == API_VERSION


def test_a_stale_schema_is_found(tmp_path: Path) -> None:
    for model in schemas.DOCUMENTS:
        (tmp_path / f"{schemas.kind_of(model)}.json").write_text(schemas.text(model))
    assert schemas.stale(tmp_path) == []
    (tmp_path / "AuditReport.json").write_text(schemas.text(schemas.DOCUMENTS[0]))
    (tmp_path / "TestReport.json").unlink()
    assert schemas.stale(tmp_path) == ["AuditReport", "TestReport"]


def test_the_changelog_states_the_version_and_every_kind() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    section = changelog.split(f"## {API_VERSION}", 1)[1].split("\n## ", 1)[0]
    for model in schemas.DOCUMENTS:
        assert f"`{schemas.kind_of(model)}`" in section


@pytest.mark.parametrize(
    ("kind", "argv"),
    [
        ("ValidateReport", ["validate", "-f", str(CLUSTER), "-f", "{mixed}"]),
        ("DryRunAnswer", ["allocate", "-f", str(CLUSTER)]),
        ("AuditReport", ["audit", "-f", str(CLUSTER), "-f", "{mixed}"]),
        ("TestReport", ["test", str(SUITES)]),
        ("DeviceAvailability", ["devices", "-f", str(CLUSTER)]),
        ("HeadroomAnswer", ["headroom", "-f", str(CLUSTER), "-f", str(WORKLOADS)]),
    ],
)
@pytest.mark.parametrize("output", ["json", "yaml"])
def test_every_document_is_versioned_and_matches_its_schema(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str, argv: list[str], output: str
) -> None:
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(MIXED)
    main([arg.format(mixed=mixed) for arg in argv] + ["-o", output])
    out = capsys.readouterr().out
    document = json.loads(out) if output == "json" else yaml.safe_load(out)
    assert list(document)[:2] == ["apiVersion", "kind"]
    assert (document["apiVersion"], document["kind"]) == (API_VERSION, kind)
    jsonschema.Draft202012Validator(published(kind)).validate(document)


def test_a_document_of_another_shape_does_not_match() -> None:
    """The schemas are strict enough to catch a changed shape (issue 17 moved allocate's nodes
    into pods[]: a document of the old shape must not pass as v1alpha1)."""
    old_allocate = {"apiVersion": API_VERSION, "kind": "DryRunAnswer", "nodes": [], "features": []}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(published("DryRunAnswer")).validate(old_allocate)
    unversioned = {"objects": [], "unreadable": [], "summary": {}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(published("ValidateReport")).validate(unversioned)
