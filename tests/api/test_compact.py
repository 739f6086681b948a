"""policies.api.compact: a compacted object reads, dumps and copies exactly as it did before.

compact() changes models in place (their sets of given fields become one shared set per distinct
value, empty unknown-field dicts become None, equal claim specs and node selectors one instance),
so the tests check what could leak through the sharing: a dump that changes, a copy that changes
the models it shares a set with, and specs shared that are not the same JSON.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from full_objects import DECODABLE
from pydantic import BaseModel

from benchmarks import clustergen
from policies.api.base import NodeSelector, TypedObject
from policies.api.compact import compact
from policies.api.core import Pod
from policies.api.kinds import decode
from policies.api.resource import ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate
from webhook.manifests import iter_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def generated() -> dict[str, dict[str, Any]]:
    """One object of each kind of the generated scale cluster (as a cluster stores them)."""
    rng = random.Random(7)
    pod = clustergen.pod("trainer-000001-1a2b3", "team-000", "gpu-node-00001", "trainer", "u-1", "c-1", rng)
    return {
        "node": clustergen.node(1, rng),
        "slice": clustergen.resource_slice(1, 8, rng),
        "class": clustergen.device_class(),
        "namespace": clustergen.namespace(0)[0],
        "quota": clustergen.namespace(0)[1],
        "template": clustergen.template("team-000", "trainer"),
        "claim": clustergen.claim("c-1", "team-000", "gpu-node-00001", 3, "trainer-000001-1a2b3", "u-1", rng),
        "pod": pod,
    }


def with_unknown_fields() -> dict[str, Any]:
    """A claim from a newer cluster: unknown fields at several levels, kept and dumped back."""
    claim = copy.deepcopy(DECODABLE["ResourceClaim"])
    claim["spec"]["devices"]["futureKnob"] = {"level": 3}
    claim["metadata"]["futureMeta"] = "x"
    claim["status"]["allocation"]["futureAllocationField"] = [1, 2]
    return claim


def documents() -> dict[str, dict[str, Any]]:
    found = {f"full {name}": raw for name, raw in DECODABLE.items()}
    found.update({f"generated {name}": raw for name, raw in generated().items()})
    found["unknown fields"] = with_unknown_fields()
    for doc in iter_documents([str(EXAMPLES / "gpu-cluster"), str(EXAMPLES / "workloads")]):
        found[str(doc.source)] = doc.raw
    return found


DOCUMENTS = documents()


def models(obj: Any) -> Iterator[BaseModel]:
    """Every model inside ``obj``, itself included."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, BaseModel):
            yield value
            stack.extend(value.__dict__.values())
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)


def fresh(raw: dict[str, Any]) -> TypedObject:
    return decode(copy.deepcopy(raw))


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_a_compacted_object_dumps_as_before(name: str) -> None:
    raw = DOCUMENTS[name]
    before = fresh(raw)
    dumps = (before.to_json(), before.model_dump(mode="json", by_alias=True), before.model_dump_json())
    compacted = compact(fresh(raw))
    assert compacted.to_json() == dumps[0]
    assert compacted.model_dump(mode="json", by_alias=True) == dumps[1]
    assert compacted.model_dump_json() == dumps[2]
    assert compacted == before
    # Compacting what is compact already changes nothing either.
    assert compact(compacted) is compacted and compacted.to_json() == dumps[0]


def test_compacted_models_share_their_field_sets_and_drop_empty_extras() -> None:
    """What the memory saving rests on (and what the copy test below must survive)."""
    a = compact(fresh(DECODABLE["ResourceClaim"]))
    b = compact(fresh(DECODABLE["ResourceClaim"]))
    pairs = list(zip(models(a), models(b), strict=True))
    assert len(pairs) > 20
    for x, y in pairs:
        assert x.__pydantic_fields_set__ is y.__pydantic_fields_set__
        assert x.__pydantic_extra__ is None


def test_a_copy_with_updates_leaves_every_model_sharing_its_field_set_unchanged() -> None:
    """pydantic copies a model's field set and extras before it updates a copy: a compacted model
    copied with an update (as apply_defaults and the dry run's placements do) must not write into
    the set it shares with every equal model of the cluster."""
    objects = [compact(fresh(raw)) for raw in DOCUMENTS.values()]
    objects += [compact(fresh(raw)) for raw in DOCUMENTS.values()]  # every set shared at least twice
    dumps = [obj.to_json() for obj in objects]
    sets = {
        id(m.__pydantic_fields_set__): frozenset(m.__pydantic_fields_set__)
        for o in objects
        for m in models(o)
    }
    copies = 0
    for obj in objects[: len(DOCUMENTS)]:
        for model in models(obj):
            unset = [n for n in type(model).model_fields if n not in model.__pydantic_fields_set__]
            update: dict[str, Any] = {"future_field": {"added": True}}
            if unset:
                update[unset[0]] = getattr(model, unset[0])
            copied = model.model_copy(update=update)
            deep = model.model_copy(update=update, deep=True)
            for made in (copied, deep):
                assert set(update) <= made.__pydantic_fields_set__ | set(made.__pydantic_extra__ or {})
                assert made.__pydantic_extra__ == {
                    **(model.__pydantic_extra__ or {}),
                    "future_field": {"added": True},
                }
            copies += 1
    assert copies > 500
    assert [obj.to_json() for obj in objects] == dumps
    for o in objects:
        for m in models(o):
            assert frozenset(m.__pydantic_fields_set__) == sets[id(m.__pydantic_fields_set__)]
            assert not m.__pydantic_extra__ or "future_field" not in m.__pydantic_extra__


def claim(name: str, spec: dict[str, Any], node: str | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "gpu-test1"},
        "spec": copy.deepcopy(spec),
    }
    if node is not None:
        results = [{"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": "gpu-0"}]
        selector = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        raw["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": selector}}
    return raw


def compact_claim(raw: dict[str, Any]) -> ResourceClaim:
    found = compact(decode(raw))
    assert isinstance(found, ResourceClaim)
    return found


ONE_GPU = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}


def test_equal_claim_specs_and_node_selectors_become_one_object() -> None:
    """Claims made from one template (and the template itself) hold one spec; claims allocated on
    one node one node selector. Equal means the same JSON: a field written out as null is not a
    field left out, and a different count is a different spec."""
    explicit = copy.deepcopy(ONE_GPU)
    explicit["devices"]["requests"][0]["exactly"]["adminAccess"] = None
    two = copy.deepcopy(ONE_GPU)
    two["devices"]["requests"][0]["exactly"]["count"] = 2
    made = [compact_claim(claim(f"pod{i}-gpu-{i}x", ONE_GPU, node="kind-worker")) for i in range(3)]
    template = compact(
        decode(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "single-gpu", "namespace": "gpu-test1"},
                "spec": {"spec": copy.deepcopy(ONE_GPU)},
            }
        )
    )
    other_node = compact_claim(claim("pod9-gpu-9x", ONE_GPU, node="kind-worker2"))
    written_out = compact_claim(claim("explicit", explicit))
    bigger = compact_claim(claim("two", two))
    assert isinstance(template, ResourceClaimTemplate)
    specs = [c.spec for c in made]
    assert all(type(s) is ResourceClaimSpec and s is specs[0] for s in specs)
    assert template.spec.spec is specs[0] and other_node.spec is specs[0]
    assert written_out.spec is not specs[0] and bigger.spec is not specs[0]
    selectors = [c.status.allocation.node_selector for c in made]
    assert all(type(s) is NodeSelector and s is selectors[0] for s in selectors)
    assert other_node.status.allocation.node_selector is not selectors[0]
    # Shared or not, each dumps its own JSON.
    assert written_out.to_json()["spec"] == explicit and bigger.to_json()["spec"] == two
    assert made[0].to_json()["spec"] == ONE_GPU


def test_pods_node_affinity_selectors_are_shared_too() -> None:
    raw = DECODABLE["Pod"]
    a, b = compact(fresh(raw)), compact(fresh(raw))
    assert isinstance(a, Pod) and isinstance(b, Pod)
    assert a.spec.affinity is not None and b.spec.affinity is not None
    node_a, node_b = a.spec.affinity.node_affinity, b.spec.affinity.node_affinity
    assert node_a is not None and node_b is not None
    required = node_a.required_during_scheduling_ignored_during_execution
    assert required is not None and required is node_b.required_during_scheduling_ignored_during_execution
