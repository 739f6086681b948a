"""Node selection as the allocator applies it (nodeaffinity semantics) and the result's node selector."""

from __future__ import annotations

from typing import Any

import pytest
from test_allocator_quirks import allocate, claim, driver_class, request, resource_slice

from policies.allocator import AllocatedState, Allocator, Features
from policies.allocator.nodes import NodeSelectorError, ResultSelectorBuilder, selector_matches
from policies.api.base import NodeSelector

LABELS = {"region": "region-1", "cores": "64", "huge": "9223372036854775808"}


def selector(*terms: dict[str, Any]) -> NodeSelector:
    return NodeSelector.model_validate({"nodeSelectorTerms": list(terms)})


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("term", "matches"),
    [
        (expr("region", "In", "region-1", "region-2"), True),
        (expr("region", "NotIn", "region-1"), False),
        (expr("zone", "NotIn", "a"), True),
        (expr("region", "Exists"), True),
        (expr("zone", "DoesNotExist"), True),
        (expr("cores", "Gt", "32"), True),
        (expr("cores", "Lt", "32"), False),
        (expr("region", "Gt", "1"), False),  # not an integer label: never greater
        # labels.Requirement parses with strconv.ParseInt(v, 10, 64): past int64 is no integer.
        (expr("huge", "Gt", "1"), False),
        (expr("cores", "Gt", "+63"), True),
        ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}, True),
        ({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}, False),
        ({}, False),  # an empty term matches nothing
    ],
)
def test_label_and_field_requirements(term: dict[str, Any], matches: bool) -> None:
    assert selector_matches(selector(term), "node-1", LABELS) is matches


def test_terms_are_ored_and_requirements_anded() -> None:
    both = {
        "matchExpressions": [
            *expr("region", "In", "region-1")["matchExpressions"],
            *expr("cores", "Lt", "8")["matchExpressions"],
        ]
    }
    assert not selector_matches(selector(both), "node-1", LABELS)
    assert selector_matches(selector(both, expr("region", "Exists")), "node-1", LABELS)


@pytest.mark.parametrize(
    "term",
    [
        expr("region", "In"),
        expr("region", "Exists", "x"),
        expr("cores", "Gt", "many"),
        expr("cores", "Lt", "9223372036854775808"),
        expr("region", "Near", "x"),
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]},
        # nodeaffinity selects by metadata.name only; any other field key is "not a valid field selector key".
        {"matchFields": [{"key": "metadata.namespace", "operator": "NotIn", "values": ["x"]}]},
    ],
)
def test_malformed_selectors_are_errors(term: dict[str, Any]) -> None:
    with pytest.raises(NodeSelectorError):
        selector_matches(selector(term), "node-1", LABELS)


def test_malformed_slice_selector_is_reported_as_a_gather_error() -> None:
    broken = resource_slice(
        "s", "driver-a", "pool-1", [{"name": "device-0"}], nodeSelector=selector(expr("x", "In")).to_json()
    )
    outcome = allocate([driver_class("class-a", "driver-a")], [broken], [claim("c", request("r", "class-a"))])
    assert outcome.results is None
    assert str(outcome.error).startswith(
        "gather pool information: failed to perform node selection for slice s:"
    )


def test_result_selector_merges_terms_and_skips_duplicates() -> None:
    builder = ResultSelectorBuilder("node-1")
    builder.add(node_name=None, binds_to_node=False, selector=selector(expr("region", "In", "a", "b")))
    builder.add(node_name=None, binds_to_node=False, selector=selector(expr("region", "In", "b", "a")))
    builder.add(node_name=None, binds_to_node=False, selector=None)  # allNodes
    builder.add(node_name=None, binds_to_node=False, selector=selector(expr("planet", "In", "earth")))
    built = builder.build()
    assert built is not None
    assert built.to_json() == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "region", "operator": "In", "values": ["a", "b"]},
                    {"key": "planet", "operator": "In", "values": ["earth"]},
                ]
            }
        ]
    }


def test_result_selector_is_pinned_by_a_node_local_or_binds_to_node_device() -> None:
    for node_name, binds_to_node in (("node-1", False), (None, True)):
        builder = ResultSelectorBuilder("node-1")
        builder.add(node_name=None, binds_to_node=False, selector=selector(expr("region", "In", "a")))
        builder.add(node_name=node_name, binds_to_node=binds_to_node, selector=None)
        built = builder.build()
        assert built is not None
        assert built.to_json()["nodeSelectorTerms"] == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]


def test_result_selector_rejects_multi_term_selectors() -> None:
    builder = ResultSelectorBuilder("node-1")
    with pytest.raises(NodeSelectorError, match=r"unsupported ResourceSlice\.NodeSelector with 2 terms"):
        builder.add(
            node_name=None, binds_to_node=False, selector=selector(expr("a", "Exists"), expr("b", "Exists"))
        )


def test_no_node_sees_only_devices_usable_everywhere() -> None:
    slices = [
        resource_slice("local", "driver-a", "pool-1", [{"name": "device-0"}]),
        resource_slice("everywhere", "driver-a", "pool-2", [{"name": "device-0"}], allNodes=True),
    ]
    allocator = Allocator(
        Features(), AllocatedState(), {"class-a": driver_class("class-a", "driver-a")}, slices
    )
    outcome = allocator.allocate(None, [claim("c", request("r", "class-a"))])
    assert outcome.results is not None
    [result] = outcome.results
    assert result.node_selector is None
    assert result.devices is not None
    assert [(d.pool, d.device) for d in result.devices.results or []] == [("pool-2", "device-0")]
