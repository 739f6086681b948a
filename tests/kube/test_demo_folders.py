"""``draguard validate -f <folder>`` says of every document what ``kubectl apply --dry-run=server -f
<file>`` says of it, file by file, against the real kube-apiserver 1.36.2 started as kubeadm starts
it (privileged containers allowed) with DeviceTaintRule served (its gate and the one
``--runtime-config`` entry; draguard is given the same entry with ``--api-versions``).

The folders (``tests/manifests/demos``) are written in the shape of the public DRA drivers' demos and
install manifests, each validated whole in one call, as a person validates a checkout: variants of
one object in two files (v1 and v1beta1 quickstarts) are warnings there, never errors, and kubectl
applies each file by itself. The cluster holds what a real one would before a demo is applied: the
folder's namespaces (with their labels), their ``default`` ServiceAccounts and the folder's
CustomResourceDefinitions; everything else is only ever dry-run.

Per document: kubectl accepted it (it is named on stdout) exactly when draguard finds no problem;
where kubectl refused it, draguard refuses it too, naming exactly the fields kubectl's error names
(every ``<field>: <error type>`` of the API server's message, every ``unknown field``), a version or
kind the server does not serve as one, and every error kubectl printed belongs to a document.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import DEVICE_TAINT_RULES, ControlPlane, call, wait_for

from webhook.cli import main

DEMOS = Path(__file__).resolve().parents[1] / "manifests" / "demos"
KUBECTL = shutil.which("kubectl")

_ERROR_TYPES = (
    "Invalid value|Required value|Unsupported value|Forbidden|Too long|Too many|Duplicate value|Not found"
    "|Internal error"
)
# A field the API server's message names: "<path>: <error type>" (paths as field.Path prints them).
_FIELD = re.compile(rf"(?<![\w.\[\]/-])([a-zA-Z][\w.\[\]/-]*): (?:{_ERROR_TYPES})")
_DECODING = re.compile(r'(?:unknown|duplicate) field "([^"]+)"')
# Where kubectl's stderr starts the error of another document (a file's only error is "The Pod ..."),
# and what comes before the API server's message.
_NEW_ERROR = re.compile(r"^(?:Error from server \(|error: |resource mapping not found |The )")
_PREFIX = re.compile(r'^Error from server \([^)]*\): error when creating "[^"]*": ')


@dataclass
class Document:
    file: str
    number: int  # 1-based, as draguard counts them
    raw: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.raw.get("metadata", {}).get("name", ""))

    @property
    def applied(self) -> str:
        """How ``kubectl apply -o name`` names it: ``deviceclass.resource.k8s.io/gpu``."""
        group = str(self.raw.get("apiVersion", "")).rpartition("/")[0]
        return f"{self.kind.lower()}{'.' + group if group else ''}/{self.name}"


def documents(folder: Path) -> list[Document]:
    return [
        Document(str(path), n, raw)
        for path in sorted(folder.glob("*.yaml"))
        for n, raw in enumerate((d for d in yaml.safe_load_all(path.read_text()) if d is not None), start=1)
    ]


def prepare(plane: ControlPlane, docs: list[Document]) -> None:
    """What the cluster holds before a demo is applied: its CRDs (established), its namespaces with
    their labels, and each namespace's default ServiceAccount."""
    api = plane.client()
    for doc in docs:
        if doc.kind == "CustomResourceDefinition":
            created = call(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc.raw)
            assert created.status in (201, 409), created.body
            path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc.name}"
            wait_for(
                f"CRD {doc.name} established", lambda path=path: _established(call(api, "GET", path).body)
            )
    labels = {d.name: d.raw["metadata"].get("labels", {}) for d in docs if d.kind == "Namespace"}
    namespaces = set(labels) | {
        d.raw["metadata"]["namespace"] for d in docs if d.raw["metadata"].get("namespace")
    }
    for namespace in sorted(namespaces):
        body = {"metadata": {"name": namespace, "labels": labels.get(namespace, {})}}
        assert call(api, "POST", "/api/v1/namespaces", body).status in (201, 409)
        account = {"metadata": {"name": "default"}}
        assert call(api, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", account).status in (
            201,
            409,
        )


def _established(crd: dict[str, Any]) -> bool:
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def kubectl_apply(plane: ControlPlane, file: str, cache: Path) -> tuple[list[str], list[str]]:
    """The objects kubectl names as applied, and its errors (one text per error)."""
    assert KUBECTL is not None
    config = ("--kubeconfig", str(plane.admin_kubeconfig), "--cache-dir", str(cache))
    done = subprocess.run(
        [KUBECTL, *config, "apply", "--dry-run=server", "-o", "name", "-f", file],
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors: list[str] = []
    for line in done.stderr.splitlines():
        if line.startswith("Warning: "):  # the server's warnings (an object the test made has no
            continue  # last-applied annotation): not refusals
        if _NEW_ERROR.match(line) or not errors:
            errors.append(line)
        else:
            errors[-1] += "\n" + line
    return done.stdout.split(), errors


def _error_of(doc: Document, errors: list[str]) -> str | None:
    """The first unclaimed error that is this document's: it names the document (``"name"``), or it
    names no object and says the document's kind could not be decoded."""
    for error in errors:
        named = json.dumps(doc.name) in error and doc.kind.lower() in error.lower()  # Go's %q
        undecoded = f"cannot be handled as a {doc.kind}:" in error
        if named or undecoded:
            errors.remove(error)
            return error
    return None


def fields(text: str) -> set[str]:
    return set(_FIELD.findall(text)) | set(_DECODING.findall(text))


def disagreement(doc: Document, problems: list[str], error: str | None) -> str | None:
    where = f"{Path(doc.file).name}: document {doc.number} ({doc.kind} {doc.name})"
    if error is None:
        return f"{where}: kubectl applies it, draguard says {problems}" if problems else None
    if not problems:
        return f"{where}: kubectl says {error!r}, draguard accepts it"
    if "resource mapping not found" in error:
        served = any(p.startswith(("apiVersion:", "kind:")) for p in problems)
        return None if served else f"{where}: kubectl says {error!r}, draguard says {problems}"
    message = _PREFIX.sub("", error)
    ours = set().union(*(fields(p.split("\n")[0]) for p in problems))
    if fields(message) != ours:
        return f"{where}: kubectl names {sorted(fields(message))} ({message!r}), draguard {sorted(ours)}"
    return None


@pytest.fixture(scope="module")
def kubectl_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kubectl's discovery cache, shared by the folders: the API server serves the same groups to
    each, and discovering them again is most of what a cold kubectl spends."""
    return tmp_path_factory.mktemp("kubectl-cache")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.parametrize("folder", sorted(p.name for p in DEMOS.iterdir() if p.is_dir()))
def test_validate_of_a_folder_says_what_kubectl_apply_of_each_file_says(
    kubeadm_plane: ControlPlane, folder: str, capsys: pytest.CaptureFixture[str], kubectl_cache: Path
) -> None:
    docs = documents(DEMOS / folder)
    prepare(kubeadm_plane, docs)
    code = main(["validate", "-f", str(DEMOS / folder), "--api-versions", DEVICE_TAINT_RULES, "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert report["unreadable"] == []
    ours = {o["source"]: o for o in report["objects"]}
    disagreements = []
    refused = 0
    for file in sorted({d.file for d in docs}):
        applied, errors = kubectl_apply(kubeadm_plane, file, kubectl_cache)
        for doc in (d for d in docs if d.file == file):
            result = ours[f"{file}: document {doc.number}"]
            # kubectl names what it applied without the namespace, in the file's order: each
            # document takes the first entry of its name (two namespaces may hold one name).
            was_applied = doc.applied in applied
            if was_applied:
                applied.remove(doc.applied)
            error = None if was_applied else _error_of(doc, errors)
            if not was_applied and error is None:
                disagreements.append(f"{file}: document {doc.number}: neither applied nor refused by kubectl")
                continue
            refused += error is not None
            found = disagreement(doc, result["problems"], error)
            if found:
                disagreements.append(found)
        disagreements += [f"{file}: an error kubectl printed for no document: {e!r}" for e in errors]
    assert disagreements == []
    assert code == (1 if refused else 0)
