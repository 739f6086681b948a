"""draguard validate says of Nodes, Namespaces and ResourceQuotas exactly what kube-apiserver 1.36.2
says (``pkg/apis/core/validation/validation.go``: ValidateNode, ValidateNamespace,
ValidateResourceQuota), cause by cause: every document of ``tests/manifests/core`` is sent as a
server-side dry run with strict field validation, and the server's causes (``field: message``)
must be the lines draguard prints for it, no more and no fewer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, call

from policies.reading import read
from policies.validation.documents import judge

CASES = Path(__file__).resolve().parents[1] / "manifests" / "core" / "cluster-objects.yaml"
PLURALS = {"Node": "nodes", "Namespace": "namespaces", "ResourceQuota": "resourcequotas"}
STRICT_DRY_RUN = {"dryRun": "All", "fieldValidation": "Strict"}
DOCUMENTS = [d for d in yaml.safe_load_all(CASES.read_text()) if d]


def _url(doc: dict[str, Any]) -> str:
    namespace = doc["metadata"].get("namespace")
    plural = PLURALS[doc["kind"]]
    return f"/api/v1/namespaces/{namespace}/{plural}" if namespace else f"/api/v1/{plural}"


def test_the_cases_cover_each_kind_valid_and_not() -> None:
    kinds = {d["kind"] for d in DOCUMENTS}
    assert kinds == set(PLURALS)
    assert sum(1 for d in DOCUMENTS if judge(read(d))) >= 10
    assert sum(1 for d in DOCUMENTS if not judge(read(d))) >= 3


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[f"{d['kind']}-{d['metadata']['name']}" for d in DOCUMENTS])
def test_draguard_says_what_the_api_server_says(control_plane: ControlPlane, doc: dict[str, Any]) -> None:
    answer = call(control_plane.client(), "POST", _url(doc), doc, STRICT_DRY_RUN)
    causes = answer.body.get("details", {}).get("causes", []) if answer.status >= 300 else []
    assert answer.status < 300 or causes, answer.message  # a refusal is a validation refusal here
    server = {f"{c['field']}: {c['message']}" for c in causes}
    reading = read(doc)
    assert reading.errors == []
    assert set(judge(reading)) == server
