"""draguard validate agrees with a real kube-apiserver 1.36.2 on manifests shaped like the public
DRA drivers' demos (``tests/manifests/drivers``).

Every document is sent to the server as ``kubectl apply`` sends it (server-side dry run, strict
field validation), in a fresh namespace, and read by draguard as ``draguard validate`` reads it.
Where the server accepts, draguard must accept; where it refuses, draguard must refuse naming
every field the server names. Custom resources are the exception the server cannot judge here (no
CRD is installed): draguard skips them with a note, and the server answers 404. A refusal that
names no field (a malformed quantity, an admission plugin's) must be a refusal in draguard too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import Answer, ControlPlane, call

from policies.api import schema
from webhook.commands.validate import Result, check
from webhook.manifests import read_entries

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests" / "drivers"
STRICT_DRY_RUN = {"dryRun": "All", "fieldValidation": "Strict"}

_DECODING = re.compile(r'(?:unknown|duplicate) field "([^"]+)"')
_TYPE = re.compile(r"Go struct field \w+\.(\S+) of type")
_INDEX = re.compile(r"\[[^\]]*\]")


def _path(api_version: str, plural: str, namespace: str | None) -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


@pytest.fixture(scope="module")
def plurals(control_plane: ControlPlane) -> dict[tuple[str, str], str]:
    """(apiVersion, kind) -> resource name, from the server's discovery."""
    api = control_plane.client()
    found: dict[tuple[str, str], str] = {}
    versions = ["v1"] + [
        v["groupVersion"] for g in call(api, "GET", "/apis").body["groups"] for v in g["versions"]
    ]
    for gv in versions:
        answer = call(api, "GET", "/api/v1" if gv == "v1" else f"/apis/{gv}")
        for r in answer.body.get("resources", []):
            if "/" not in r["name"]:
                found[(gv, r["kind"])] = r["name"]
    return found


def server_fields(answer: Answer) -> list[str]:
    """The fields a refusal names: strict decoding's, a type error's (without list indices, as Go's
    decoder gives it), or validation's causes."""
    message = answer.message
    fields = _DECODING.findall(message) + _TYPE.findall(message)
    causes = answer.body.get("details", {}).get("causes", [])
    fields += [c["field"] for c in causes if c.get("field")]
    return fields


def names(field: str, errors: list[str]) -> bool:
    """Whether one of draguard's error lines names ``field`` (a type error's path has no indices)."""
    return any(field in e or field in _INDEX.sub("", e) for e in errors)


def in_namespace(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    if schema.is_namespaced(doc.get("apiVersion", ""), doc.get("kind", "")):
        doc.setdefault("metadata", {})["namespace"] = namespace
    return doc


@pytest.mark.parametrize("manifest", sorted(p.name for p in MANIFESTS.glob("*.yaml")))
def test_draguard_agrees_with_the_api_server(
    control_plane: ControlPlane,
    kube_namespace: str,
    plurals: dict[tuple[str, str], str],
    manifest: str,
    tmp_path: Path,
) -> None:
    docs = [
        in_namespace(d, kube_namespace) for d in yaml.safe_load_all((MANIFESTS / manifest).read_text()) if d
    ]
    file = tmp_path / manifest
    file.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    entries = read_entries([str(file)])
    # The session's control plane runs kube-apiserver with its own defaults, privileged containers
    # refused: draguard's --allow-privileged=false.
    checked = check(entries, [], {kube_namespace: {}}, allow_privileged=False)
    results: dict[str, Result] = {r.where: r for r in checked}
    api = control_plane.client()
    disagreements = []
    for i, (doc, entry) in enumerate(zip(docs, entries, strict=True), start=1):
        where = f"{manifest} document {i} ({doc['kind']} {doc['metadata'].get('name')})"
        assert entry.reading is not None
        if entry.reading.skipped is not None:
            assert (doc["apiVersion"], doc["kind"]) not in plurals or entry.reading.skipped.startswith(
                "a Kubernetes"
            )
            continue
        errors = results[entry.where].errors
        if doc["kind"] == "Namespace":
            assert errors == [], where  # the test's own namespace stands in for it
            continue
        plural = plurals.get((doc["apiVersion"], doc["kind"]))
        if plural is None:
            if not any(e.startswith(("apiVersion:", "kind:")) for e in errors):
                disagreements.append(f"{where}: not served by the API server, but draguard says {errors}")
            continue
        namespace = doc["metadata"].get("namespace")
        answer = call(api, "POST", _path(doc["apiVersion"], plural, namespace), doc, STRICT_DRY_RUN)
        if answer.status < 300:
            if errors:
                disagreements.append(f"{where}: the API server accepts it, draguard says {errors}")
            continue
        fields = server_fields(answer)
        if not fields:
            # A refusal naming no field: a value the decoder cannot read (a malformed quantity) or
            # an admission plugin's (an overhead without a RuntimeClass). draguard must refuse too,
            # unless the server looked up an object the cluster does not have (a ServiceAccount, a
            # PriorityClass): that is the cluster's state, not the document's validity.
            if not errors and "not found" not in answer.message:
                disagreements.append(
                    f"{where}: the API server refuses it ({answer.message}), draguard accepts it"
                )
            continue
        missing = [f for f in fields if not names(f, errors)]
        if missing:
            disagreements.append(
                f"{where}: the API server refuses {missing} ({answer.message}), draguard says {errors}"
            )
    assert disagreements == []
