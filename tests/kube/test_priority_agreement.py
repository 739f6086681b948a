"""PriorityClasses and pod priorities: draguard validate, and the priority draguard resolves, agree
with a real kube-apiserver 1.36.2.

The same documents go to the server, created one after another as ``kubectl apply`` would create
them, and to ``draguard validate``: the classes' validation, the Priority admission plugin's
refusals (a class that does not exist, a priority or a policy the class does not give, a second
default class) word for word, and for each pod the server takes, the priority, policy and class
name it stored, which draguard must resolve the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import Answer, ControlPlane, call

from policies.api.core import Pod
from policies.priority import Priorities
from webhook.commands.validate import check
from webhook.manifests import read_entries

SCHEDULING = "scheduling.k8s.io/v1"
CLASSES = f"/apis/{SCHEDULING}/priorityclasses"


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": SCHEDULING,
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def pod(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    meta = {"generateName": name} if name.endswith("-") else {"name": name}
    container = {"name": "main", "image": "registry.example.com/train:2"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**meta, "namespace": namespace},
        "spec": {"containers": [container], **spec},
    }


def documents(ns: str) -> list[dict[str, Any]]:
    """Classes (some the server refuses), then pods naming them (some it refuses)."""
    high, never, standard = f"{ns}-high", f"{ns}-never", f"{ns}-standard"
    return [
        priority_class(high, 1000),
        priority_class(never, 500, preemptionPolicy="Never", description="waits for room"),
        priority_class(standard, 10, globalDefault=True, preemptionPolicy="Never"),
        priority_class(f"{ns}-second-default", 5, globalDefault=True),
        priority_class(f"system-{ns}", 1),
        priority_class("system-cluster-critical", 5),
        priority_class(f"{ns}-too-high", 1_000_000_001),
        priority_class(f"{ns}-sometimes", 1, preemptionPolicy="Sometimes"),
        pod("missing", ns, priorityClassName=f"{ns}-missing"),
        pod("missing-", ns, priorityClassName=f"{ns}-missing"),
        pod("other-priority", ns, priorityClassName=high, priority=5),
        pod("other-policy", ns, priorityClassName=never, preemptionPolicy="PreemptLowerPriority"),
        pod("default-priority", ns, priority=11),
        pod("default-policy", ns, preemptionPolicy="PreemptLowerPriority"),
        pod("high", ns, priorityClassName=high),
        pod("never", ns, priorityClassName=never, preemptionPolicy="Never"),
        pod("defaulted", ns),
        pod("node-critical", ns, priorityClassName="system-node-critical"),
    ]


@pytest.fixture
def classes_removed(control_plane: ControlPlane, kube_namespace: str) -> Iterator[None]:
    """Deletes the classes the test made (a default class would otherwise apply to every later pod)."""
    yield
    api = control_plane.client()
    for item in call(api, "GET", CLASSES).body["items"]:
        if item["metadata"]["name"].startswith((kube_namespace, f"system-{kube_namespace}")):
            call(api, "DELETE", f"{CLASSES}/{item['metadata']['name']}")


def created(control_plane: ControlPlane, doc: dict[str, Any]) -> Answer:
    namespace = doc["metadata"].get("namespace")
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else CLASSES
    return call(control_plane.client(), "POST", path, doc)


def server_lines(answer: Answer) -> list[str]:
    """A refusal as draguard words it: an admission plugin's whole message (403), or a line per
    cause of a validation error (422)."""
    if answer.status == 403:
        return [answer.message]
    return [f"{c['field']}: {c['message']}" for c in answer.body["details"]["causes"]]


def test_draguard_refuses_and_resolves_as_the_api_server(
    control_plane: ControlPlane, kube_namespace: str, classes_removed: None, tmp_path: Path
) -> None:
    docs = documents(kube_namespace)
    file = tmp_path / "priorities.yaml"
    file.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    entries = read_entries([str(file)])
    results = check(entries, [], {kube_namespace: {}})
    objects = [e.reading.obj for e in entries if e.reading is not None and e.reading.obj is not None]
    priorities = Priorities.among(objects)
    disagreements = []
    statuses = set()
    for doc, result, obj in zip(docs, results, objects, strict=True):
        answer = created(control_plane, doc)
        statuses.add(answer.status)
        where = f"{doc['kind']} {doc['metadata']}"
        if answer.status >= 300:
            expected = server_lines(answer)
            # A class the input lacks: the server's words, then draguard names the classes there are.
            said = [e.split(" (the PriorityClasses are ", 1)[0] for e in result.errors]
            if said != expected:
                disagreements.append(f"{where}: the API server says {expected}, draguard {result.errors}")
            continue
        if result.errors:
            disagreements.append(f"{where}: the API server takes it, draguard says {result.errors}")
        if isinstance(obj, Pod):
            stored = answer.body["spec"]
            ours = priorities.admit(obj).spec
            theirs = (stored.get("priorityClassName"), stored.get("priority"), stored.get("preemptionPolicy"))
            if (ours.priority_class_name, ours.priority, ours.preemption_policy) != theirs:
                disagreements.append(f"{where}: the API server stored {theirs}, draguard resolves {ours}")
    assert disagreements == []
    assert statuses == {201, 403, 422}  # taken, refused by admission, refused by validation


def test_an_update_may_change_neither_value_nor_policy(
    control_plane: ControlPlane, kube_namespace: str, classes_removed: None, tmp_path: Path
) -> None:
    api = control_plane.client()
    name = f"{kube_namespace}-batch"
    stored = call(api, "POST", CLASSES, priority_class(name, 100, description="training")).body
    changed = {**stored, "apiVersion": SCHEDULING, "kind": "PriorityClass"}
    changed.update(value=200, preemptionPolicy="Never", description="training, less urgent")
    answer = call(api, "PUT", f"{CLASSES}/{name}", changed)
    assert answer.status == 422
    (tmp_path / "old.yaml").write_text(
        yaml.safe_dump({**stored, "apiVersion": SCHEDULING, "kind": "PriorityClass"})
    )
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(changed))
    entries, olds = read_entries([str(tmp_path / "new.yaml")]), read_entries([str(tmp_path / "old.yaml")])
    (result,) = check(entries, olds, {})
    assert result.errors == server_lines(answer)
