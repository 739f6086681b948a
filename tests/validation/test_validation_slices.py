"""ResourceSlice rules (validateResourceSliceSpec, validateDevice and the capacity request policy)."""

from __future__ import annotations

from typing import Any

import pytest
from dra_objects import (
    C_IDENTIFIER_MSG,
    DNS_LABEL_MSG,
    DNS_SUBDOMAIN_MSG,
    LABEL_NAME_MSG,
    changed,
    device,
    lines,
    resource_slice,
)

DEV = "spec.devices[0]"
ON_NODE = {
    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]
}
ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}


def shared(policy: dict[str, Any], value: str = "10") -> dict[str, Any]:
    """A multi-allocatable device with one capacity ``c`` of ``value`` and the given request policy."""
    return device(allowMultipleAllocations=True, capacity={"c": {"value": value, "requestPolicy": policy}})


def attrs(**attributes: Any) -> dict[str, Any]:
    return device(attributes=attributes)


VALID: list[tuple[str, dict[str, Any]]] = [
    ("node-local device", resource_slice(device())),
    ("no devices", resource_slice()),
    ("node selector with one term", resource_slice(device(), nodeSelector=ZONE_A)),
    ("all nodes", resource_slice(device(), allNodes=True)),
    (
        "per-device node selection",
        resource_slice(
            device("a", nodeName="node-1"),
            device("b", nodeSelector=ZONE_A),
            device("c", allNodes=True),
            perDeviceNodeSelection=True,
        ),
    ),
    (
        "pool name of several subdomains",
        resource_slice(device(), pool={"name": "a.b/c", "resourceSliceCount": 1}),
    ),
    (
        "shared counters only",
        resource_slice(sharedCounters=[{"name": "set-0", "counters": {"mem": {"value": "8"}}}]),
    ),
    (
        "all attribute types",
        resource_slice(
            attrs(
                i={"int": -3},
                b={"bool": False},
                s={"string": ""},
                v={"version": "1.2.3-rc.1+build.5"},
                **{"dra.example.com/x": {"int": 1}},
            )
        ),
    ),
    ("list attributes", resource_slice(attrs(l={"ints": [1, 2]}, m={"versions": ["1.0.0"]}))),
    (
        "32 attributes and capacities",
        resource_slice(device(attributes={f"a{i}": {"int": i} for i in range(32)})),
    ),
    ("128 plain devices", resource_slice(*[device(f"d{i}") for i in range(128)])),
    ("taints", resource_slice(device(taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))),
    (
        "consumes counters",
        resource_slice(device(consumesCounters=[{"counterSet": "s", "counters": {"c": {"value": "1"}}}])),
    ),
    ("valid values", resource_slice(shared({"default": "2", "validValues": ["1", "2", "4"]}))),
    (
        "valid range",
        resource_slice(shared({"default": "4", "validRange": {"min": "2", "max": "10", "step": "2"}})),
    ),
    (
        "binding conditions",
        resource_slice(device(bindingConditions=["a"], bindingFailureConditions=["b"], bindsToNode=True)),
    ),
    (
        "1.36 node allocatable mapping",
        resource_slice(
            device(
                allowMultipleAllocations=True,
                capacity={"cores": {"value": "8"}},
                nodeAllocatableResourceMappings={
                    "cpu": {"capacityKey": "cores"},
                    "memory": {"allocationMultiplier": "2Gi"},
                },
            )
        ),
    ),
    (
        "1.37 node allocatable resources",
        resource_slice(
            device(
                capacity={"cores": {"value": "8"}},
                nodeAllocatableResources={
                    "cpu": {"mapping": {"capacityKey": "cores", "capacityMultiplier": "2"}},
                    "hugepages-2Mi": {"mapping": {"deviceMultiplier": "1"}, "overhead": {"perPod": "0"}},
                },
            )
        ),
    ),
]


@pytest.mark.parametrize("obj", [pytest.param(o, id=name) for name, o in VALID])
def test_valid_slices(obj: dict[str, Any]) -> None:
    assert lines(obj) == []


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "driver missing, pool incomplete",
        resource_slice(device(), driver="", pool={"name": "", "generation": -1}),
        [
            "spec.driver: Required value",
            "spec.pool.name: Required value",
            "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
            "spec.pool.generation: Invalid value: -1: must be greater than or equal to zero",
        ],
    ),
    (
        "pool name part not a subdomain",
        resource_slice(device(), pool={"name": "a/B", "resourceSliceCount": 1}),
        [f'spec.pool.name: Invalid value: "B": {DNS_SUBDOMAIN_MSG}'],
    ),
    (
        "pool name longer than 253",
        resource_slice(device(), pool={"name": "/".join(["a" * 60] * 5), "resourceSliceCount": 1}),
        ["spec.pool.name: Too long: may not be more than 253 bytes"],
    ),
    (
        "no node selection",
        {
            **resource_slice(device()),
            "spec": {"driver": "d.io", "pool": {"name": "p", "resourceSliceCount": 1}},
        },
        [
            "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required"
        ],
    ),
    (
        "two node selections",
        resource_slice(device(), nodeName="node-1", allNodes=True),
        [
            'spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, '
            "`allNodes`, "
            "`perDeviceNodeSelection` is required, but multiple fields are set"
        ],
    ),
    (
        "empty node name, allNodes false",
        resource_slice(device(), nodeName="", allNodes=False, nodeSelector=ZONE_A),
        [
            'spec.nodeName: Invalid value: "": must be either unset or set to a non-empty string',
            "spec.allNodes: Invalid value: false: must be either unset or set to true",
        ],
    ),
    (
        "node selector with two terms",
        resource_slice(device(), nodeSelector={"nodeSelectorTerms": ZONE_A["nodeSelectorTerms"] * 2}),
        [
            # Go's %#v of []core.NodeSelectorTerm (field.Error.ErrorBody prints non-scalar values so).
            "spec.nodeSelector.nodeSelectorTerms: Invalid value: []core.NodeSelectorTerm{"
            "core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{"
            'core.NodeSelectorRequirement{Key:"zone", Operator:"In", Values:[]string{"a"}}}, '
            "MatchFields:[]core.NodeSelectorRequirement(nil)}, "
            "core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{"
            'core.NodeSelectorRequirement{Key:"zone", Operator:"In", Values:[]string{"a"}}}, '
            "MatchFields:[]core.NodeSelectorRequirement(nil)}}: "
            "must have exactly one node selector term"
        ],
    ),
    (
        "node selector without terms",
        resource_slice(device(), nodeSelector={}),
        [
            "spec.nodeSelector.nodeSelectorTerms: Required value: must have at least one node selector term",
            "spec.nodeSelector.nodeSelectorTerms: Invalid value: []core.NodeSelectorTerm(nil): "
            "must have exactly one node selector term",
        ],
    ),
    (
        "node selector with an empty term list",
        resource_slice(device(), nodeSelector={"nodeSelectorTerms": []}),
        [
            "spec.nodeSelector.nodeSelectorTerms: Required value: must have at least one node selector term",
            "spec.nodeSelector.nodeSelectorTerms: Invalid value: []core.NodeSelectorTerm{}: "
            "must have exactly one node selector term",
        ],
    ),
    (
        "node selector terms with empty and absent parts",
        resource_slice(
            device(),
            nodeSelector={
                "nodeSelectorTerms": [
                    {"matchExpressions": [], "matchFields": [{"key": "metadata.name", "operator": "In"}]},
                    {},
                ]
            },
        ),
        [
            "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values: Required value: "
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            "spec.nodeSelector.nodeSelectorTerms: Invalid value: []core.NodeSelectorTerm{"
            "core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{}, "
            "MatchFields:[]core.NodeSelectorRequirement{core.NodeSelectorRequirement{"
            'Key:"metadata.name", Operator:"In", Values:[]string(nil)}}}, '
            "core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement(nil), "
            "MatchFields:[]core.NodeSelectorRequirement(nil)}}: must have exactly one node selector term",
        ],
    ),
    (
        "node selector requirements",
        resource_slice(
            device(),
            nodeSelector={
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "zone", "operator": "In"},
                            {"key": "zone", "operator": "Exists", "values": ["a"]},
                            {"key": "n", "operator": "Gt", "values": ["1", "2"]},
                            {"key": "a b", "operator": "Near", "values": ["x y"]},
                        ],
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                            {"key": "spec.x", "operator": "Exists"},
                        ],
                    }
                ]
            },
        ),
        [
            "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values: Required value: "
            "must be specified when `operator` is 'In' or 'NotIn'",
            "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[1].values: Forbidden: "
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[2].values: Required value: "
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
            'spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[3].operator: Invalid value: "Near": '
            "not a valid selector operator",
            'spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[3].key: Invalid value: "a b": '
            f"{LABEL_NAME_MSG}",
            'spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[3].values[0]: Invalid value: "x y": '
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and "
            "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
            "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values: Required value: "
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            'spec.nodeSelector.nodeSelectorTerms[0].matchFields[1].operator: Invalid value: "Exists": '
            "not a valid selector operator",
            'spec.nodeSelector.nodeSelectorTerms[0].matchFields[1].key: Invalid value: "spec.x": '
            "not a valid field selector key",
        ],
    ),
    (
        "devices and shared counters together",
        resource_slice(device(), sharedCounters=[{"name": "s", "counters": {"c": {"value": "1"}}}]),
        ['spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed'],
    ),
    (
        "more than 128 devices",
        resource_slice(*[device(f"d{i}") for i in range(129)]),
        ["spec.devices: Too many: 129: must have at most 128 items"],
    ),
    (
        "more than 64 devices when one has taints",
        resource_slice(
            *[device(f"d{i}") for i in range(64)], device("t", taints=[{"key": "k", "effect": "None"}])
        ),
        ["spec.devices: Too many: 65: must have at most 64 items"],
    ),
    (
        "duplicate device names",
        resource_slice(device("a"), device("a")),
        ['spec.devices[1]: Duplicate value: "a"'],
    ),
    (
        "device name not a DNS label",
        resource_slice(device("GPU-0")),
        [f'{DEV}.name: Invalid value: "GPU-0": {DNS_LABEL_MSG}'],
    ),
    (
        "more than 32 attributes and capacities",
        resource_slice(
            device(
                attributes={f"a{i}": {"int": i} for i in range(30)},
                capacity={f"c{i}": {"value": "1"} for i in range(3)},
            )
        ),
        [f"{DEV}: Invalid value: 33: the total number of attributes and capacities must not exceed 32"],
    ),
    (
        "more than 48 attribute values",
        resource_slice(attrs(l={"ints": list(range(40))}, m={"strings": [str(i) for i in range(9)]})),
        [f"{DEV}: Invalid value: 49: the total number of attribute values must not exceed 48"],
    ),
    (
        "attribute names",
        resource_slice(
            attrs(
                **{
                    "1st": {"int": 1},
                    "a/b/c": {"int": 1},
                    "/x": {"int": 1},
                    "d.io/": {"int": 1},
                    "D_IO/x": {"int": 1},
                    "x" * 33: {"int": 1},
                }
            )
        ),
        [
            f'{DEV}.attributes: Invalid value: "1st": {C_IDENTIFIER_MSG}',
            f'{DEV}.attributes: Invalid value: "a/b/c": must not contain more than one slash',
            f'{DEV}.attributes: Invalid value: "": the domain must not be empty',
            f'{DEV}.attributes: Invalid value: "": the name must not be empty',
            f'{DEV}.attributes: Invalid value: "D_IO": {DNS_SUBDOMAIN_MSG}',
            f"{DEV}.attributes: Too long: may not be more than 32 bytes",
        ],
    ),
    (
        "empty list attributes print as Go slices",
        resource_slice(attrs(b={"bools": []}, i={"ints": []}, v={"versions": []})),
        [
            f"{DEV}.attributes[b].bools: Invalid value: []bool{{}}: must not be empty if specified",
            f"{DEV}.attributes[i].ints: Invalid value: []int64{{}}: must not be empty if specified",
            f"{DEV}.attributes[v].versions: Invalid value: []string{{}}: must not be empty if specified",
        ],
    ),
    (
        "attribute values",
        resource_slice(
            attrs(
                none={},
                two={"int": 1, "string": "a"},
                lists={"ints": [1, 2], "bools": [True], "strings": ["a"]},
                long={"string": "x" * 65},
                ver={"version": "1.02.3"},
                empty={"strings": []},
                items={"versions": ["1.0.0", "v1"]},
            )
        ),
        [
            f'{DEV}.attributes[none]: Invalid value: "": exactly one value must be specified',
            # The internal resource.DeviceAttribute printed with %#v; set pointers print as an
            # address no two API servers share, a fixed one stands in.
            f"{DEV}.attributes[two]: Invalid value: resource.DeviceAttribute{{"
            "IntValue:(*int64)(0xc000000000), BoolValue:(*bool)(nil), StringValue:(*string)(0xc000000000), "
            "VersionValue:(*string)(nil), IntValues:[]int64(nil), BoolValues:[]bool(nil), "
            "StringValues:[]string(nil), VersionValues:[]string(nil)}: exactly one value must be specified",
            f"{DEV}.attributes[lists]: Invalid value: resource.DeviceAttribute{{"
            "IntValue:(*int64)(nil), BoolValue:(*bool)(nil), StringValue:(*string)(nil), "
            "VersionValue:(*string)(nil), IntValues:[]int64{1, 2}, BoolValues:[]bool{true}, "
            'StringValues:[]string{"a"}, VersionValues:[]string(nil)}: exactly one value must be specified',
            f"{DEV}.attributes[long].string: Too long: may not be more than 64 bytes",
            f'{DEV}.attributes[ver].version: Invalid value: "1.02.3": must be a string compatible with '
            "semver.org spec 2.0.0",
            # The bad value is the Go slice, printed with %#v.
            f"{DEV}.attributes[empty].strings: Invalid value: []string{{}}: must not be empty if specified",
            f'{DEV}.attributes[items].versions[1]: Invalid value: "v1": must be a string compatible with '
            "semver.org spec 2.0.0",
        ],
    ),
    (
        "long attribute key shortened in the path",
        resource_slice(attrs(**{"d" * 63 + "/" + "i" * 40: {"string": "x" * 65}})),
        [
            f"{DEV}.attributes: Too long: may not be more than 32 bytes",
            f"{DEV}.attributes[{'d' * 47}...{'d' * 5}/{'i' * 40}].string: Too long: may not be more than 64 "
            "bytes",
        ],
    ),
    (
        "request policy without multiple allocations",
        resource_slice(device(capacity={"c": {"value": "1", "requestPolicy": {"default": "1"}}})),
        [f"{DEV}.capacity[c].requestPolicy: Forbidden: allowMultipleAllocations must be true"],
    ),
    (
        "valid values and valid range together",
        resource_slice(shared({"default": "1", "validValues": ["1"], "validRange": {"min": "1"}})),
        [
            f"{DEV}.capacity[c].requestPolicy: Forbidden: exactly one policy can be specified, cannot "
            'specify "validValues" '
            'and "validRange" at the same time'
        ],
    ),
    (
        "valid values without default",
        resource_slice(shared({"validValues": ["1"]})),
        [f"{DEV}.capacity[c].requestPolicy.default: Required value: required when validValues is defined"],
    ),
    (
        "valid values unsorted, above capacity, repeated, default missing",
        resource_slice(shared({"default": "3", "validValues": ["2", "1", "20", "1"]})),
        [
            f'{DEV}.capacity[c].requestPolicy.validValues[1]: Invalid value: "1": values must be sorted in '
            "ascending order",
            f'{DEV}.capacity[c].requestPolicy.validValues[3]: Invalid value: "1": values must be sorted in '
            "ascending order",
            f'{DEV}.capacity[c].requestPolicy.validValues[2]: Invalid value: "20": option is larger than '
            "capacity value: 10",
            f'{DEV}.capacity[c].requestPolicy.validValues[3]: Duplicate value: "1"',
            f'{DEV}.capacity[c].requestPolicy.validValues: Invalid value: "3": default value is not valid '
            "according to the requestPolicy",
        ],
    ),
    (
        "duplicates are compared by integer value",
        resource_slice(shared({"default": "1Gi", "validValues": ["1Gi", "1024Mi"]}, value="10Gi")),
        [f'{DEV}.capacity[c].requestPolicy.validValues[1]: Duplicate value: "1073741824"'],
    ),
    (
        "step beyond int64",
        resource_slice(
            shared(
                {"default": "0", "validRange": {"min": "0", "step": "18446744073709551616"}},
                value="18446744073709551616",
            )
        ),
        [
            f'{DEV}.capacity[c].requestPolicy.validRange.step: Invalid value: "18446744073709551616": '
            "must not be larger than 9223372036854775807"
        ],
    ),
    (
        "more than 10 valid values",
        resource_slice(shared({"default": "1", "validValues": [str(i) for i in range(1, 12)]}, value="20")),
        [
            f"{DEV}.capacity[c].requestPolicy.validValues: Too many: 11: must have at most 10 items",
            f'{DEV}.capacity[c].requestPolicy.validValues: Invalid value: "1": default value is not valid '
            "according to the requestPolicy",
        ],
    ),
    (
        "valid range without min",
        resource_slice(shared({"default": "1", "validRange": {"max": "2"}})),
        [
            f"{DEV}.capacity[c].requestPolicy.validRange.min: Required value: required when validRange is "
            "defined"
        ],
    ),
    (
        "valid range bounds",
        resource_slice(shared({"default": "12", "validRange": {"min": "11", "max": "5"}})),
        [
            f'{DEV}.capacity[c].requestPolicy.validRange.min: Invalid value: "11": min is larger than '
            "capacity value: 10",
            f'{DEV}.capacity[c].requestPolicy.validRange.max: Invalid value: "11": min is larger than max: 5',
            f'{DEV}.capacity[c].requestPolicy.validRange.default: Invalid value: "12": default is more than '
            "max: 5",
        ],
    ),
    (
        "valid range default below min",
        resource_slice(shared({"default": "1", "validRange": {"min": "2"}})),
        [
            f'{DEV}.capacity[c].requestPolicy.validRange.default: Invalid value: "1": default is less than '
            "min: 2"
        ],
    ),
    (
        "valid range step not positive",
        resource_slice(shared({"default": "2", "validRange": {"min": "2", "step": "0"}})),
        [f'{DEV}.capacity[c].requestPolicy.validRange.step: Invalid value: "0": must be greater than zero'],
    ),
    (
        "valid range step beyond capacity and off the grid",
        resource_slice(shared({"default": "3", "validRange": {"min": "2", "max": "8", "step": "9"}})),
        [
            f'{DEV}.capacity[c].requestPolicy.validRange.step: Invalid value: "9": one step 11 is larger '
            "than capacity "
            "value: 10",
            f'{DEV}.capacity[c].requestPolicy.validRange.step: Invalid value: "3": value is not a multiple '
            "of a given "
            "step (9) from (2)",
            f'{DEV}.capacity[c].requestPolicy.validRange.step: Invalid value: "8": value is not a multiple '
            "of a given "
            "step (9) from (2)",
        ],
    ),
    (
        "valid range with a negative minimum",
        resource_slice(shared({"default": "0", "validRange": {"min": "-2", "step": "2"}})),
        [
            f'{DEV}.capacity[c].requestPolicy.validRange.min: Invalid value: "-2": must be greater than or '
            "equal to 0"
        ],
    ),
    (
        "taints",
        resource_slice(
            device(taints=[{"key": "", "effect": ""}, {"key": "k", "effect": "PreferNoSchedule"}])
        ),
        [
            f'{DEV}.taints[0].key: Invalid value: "": name part must be non-empty',
            f'{DEV}.taints[0].key: Invalid value: "": {LABEL_NAME_MSG}',
            f"{DEV}.taints[0].effect: Required value",
            f'{DEV}.taints[1].effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", '
            '"NoSchedule", "None"',
        ],
    ),
    (
        "more than 16 taints",
        resource_slice(device(taints=[{"key": f"k{i}", "effect": "None"} for i in range(17)])),
        [f"{DEV}.taints: Too many: 17: must have at most 16 items"],
    ),
    (
        "counter consumption",
        resource_slice(
            device(
                consumesCounters=[
                    {"counterSet": "", "counters": {}},
                    {"counterSet": "S", "counters": {"Bad": {"value": "1"}}},
                    {"counterSet": "S", "counters": {"c": {"value": "1"}}},
                ]
            )
        ),
        [f"{DEV}.consumesCounters: Too many: 3: must have at most 2 items"],
    ),
    (
        "counter consumption entries",
        resource_slice(
            device(
                consumesCounters=[
                    {"counterSet": "", "counters": {}},
                    {"counterSet": "S", "counters": {"Bad": {"value": "1"}}},
                ]
            )
        ),
        [
            f"{DEV}.consumesCounters[0].counterSet: Required value",
            f"{DEV}.consumesCounters[0].counters: Required value",
            f'{DEV}.consumesCounters[1].counterSet: Invalid value: "S": {DNS_LABEL_MSG}',
            f'{DEV}.consumesCounters[1].counters: Invalid value: "Bad": {DNS_LABEL_MSG}',
        ],
    ),
    (
        "counter sets",
        resource_slice(
            sharedCounters=[
                {"name": "a", "counters": {f"c{i}": {"value": "1"} for i in range(33)}},
                {"name": "a", "counters": {"c": {"value": "1"}}},
            ]
        ),
        [
            "spec.sharedCounters[0].counters: Too many: 33: must have at most 32 items",
            'spec.sharedCounters[1]: Duplicate value: "a"',
        ],
    ),
    (
        "more than 8 counter sets",
        resource_slice(
            sharedCounters=[{"name": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(9)]
        ),
        ["spec.sharedCounters: Too many: 9: must have at most 8 items"],
    ),
    (
        "per-device node fields without per-device selection",
        resource_slice(device(nodeName="node-1")),
        [
            f"{DEV}: Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` can only be set if "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
        ],
    ),
    (
        "per-device selection without a device choice, or with two",
        resource_slice(
            device("a"),
            device("b", nodeName="node-1", allNodes=True),
            device("c", nodeName="", allNodes=False),
            perDeviceNodeSelection=True,
        ),
        [
            "spec.devices[0]: Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is "
            "required "
            "when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            'spec.devices[1]: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, '
            "`nodeSelector`, or "
            "`allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            'spec.devices[2].nodeName: Invalid value: "": must not be empty',
            "spec.devices[2].allNodes: Invalid value: false: must be either unset or set to true",
            "spec.devices[2]: Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is "
            "required "
            "when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        ],
    ),
    (
        "perDeviceNodeSelection false",
        resource_slice(device(), perDeviceNodeSelection=False),
        [
            "spec.perDeviceNodeSelection: Invalid value: false: must be either unset or set to true",
            "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` "
            "is required",
        ],
    ),
    (
        "binding conditions",
        resource_slice(
            device(bindingConditions=["a b", "x", "x"], bindingFailureConditions=["x", "f", "f"]),
            device("d1", bindingFailureConditions=["a", "b", "c", "d", "e"]),
        ),
        [
            f'{DEV}.bindingConditions[0]: Invalid value: "a b": {LABEL_NAME_MSG}',
            f'{DEV}.bindingConditions[2]: Duplicate value: "x"',
            f'{DEV}.bindingFailureConditions[0]: Invalid value: "x": bindingFailureConditions must not '
            "overlap with "
            "bindingConditions",
            f'{DEV}.bindingFailureConditions[2]: Duplicate value: "f"',
            "spec.devices[1].bindingFailureConditions: Too many: 5: must have at most 4 items",
        ],
    ),
    (
        "1.36 node allocatable mapping",
        resource_slice(
            device(
                capacity={"cores": {"value": "8"}},
                nodeAllocatableResourceMappings={
                    "example.com/gpu": {"allocationMultiplier": "1"},
                    "cpu": {"capacityKey": "threads", "allocationMultiplier": "-1"},
                    "memory": {"capacityKey": ""},
                },
            )
        ),
        [
            f'{DEV}.nodeAllocatableResourceMappings[example.com/gpu]: Invalid value: "example.com/gpu": must '
            "be a node "
            "allocatable resource name",
            f'{DEV}.nodeAllocatableResourceMappings[cpu].capacityKey: Not found: "threads"',
            f'{DEV}.nodeAllocatableResourceMappings[cpu].allocationMultiplier: Invalid value: "-1": must be '
            "positive",
            f'{DEV}.nodeAllocatableResourceMappings[memory].capacityKey: Invalid value: "": capacityKey must '
            "not be an "
            "empty string",
        ],
    ),
    (
        "1.37 node allocatable resources",
        resource_slice(
            device(
                capacity={"cores": {"value": "8"}},
                nodeAllocatableResources={
                    "ephemeral-storage": {},
                    "cpu": {"mapping": {"capacityKey": "cores"}, "overhead": {}},
                    "memory": {"mapping": {"capacityMultiplier": "1", "deviceMultiplier": "0"}},
                    "hugepages-1Gi": {"overhead": {"perPod": "-1Gi", "perContainer": "-1"}},
                },
            )
        ),
        [
            f'{DEV}.nodeAllocatableResources[ephemeral-storage]: Invalid value: "ephemeral-storage": must be '
            "a node "
            "allocatable resource name",
            f"{DEV}.nodeAllocatableResources[ephemeral-storage]: Required value: at least one of mapping or "
            "overhead "
            "must be set",
            f"{DEV}.nodeAllocatableResources[cpu].mapping.capacityMultiplier: Required value: "
            "capacityMultiplier is "
            "required when capacityKey is set",
            f'{DEV}.nodeAllocatableResources[cpu].overhead: Invalid value: "": at least one of perPod or '
            "perContainer "
            "must be set",
            f'{DEV}.nodeAllocatableResources[memory].mapping.deviceMultiplier: Invalid value: "0": must be '
            "positive",
            f"{DEV}.nodeAllocatableResources[memory].mapping.capacityKey: Required value: capacityKey is "
            "required when "
            "capacityMultiplier is set",
            f'{DEV}.nodeAllocatableResources[hugepages-1Gi].overhead.perPod: Invalid value: "-1Gi": must be '
            "non-negative",
            f'{DEV}.nodeAllocatableResources[hugepages-1Gi].overhead.perContainer: Invalid value: "-1": must '
            "be "
            "non-negative",
        ],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in INVALID])
def test_invalid_slices(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj) == expected


# --- updates -------------------------------------------------------------------------------------------


def test_driver_pool_name_and_node_name_are_immutable() -> None:
    old = resource_slice(device())
    new = changed(
        changed(changed(old, "spec.driver", "other.io"), "spec.pool.name", "other"), "spec.nodeName", "node-2"
    )
    assert lines(new, old) == [
        'spec.pool.name: Invalid value: "other": field is immutable',
        'spec.driver: Invalid value: "other.io": field is immutable',
        'spec.nodeName: Invalid value: "node-2": field is immutable',
    ]


def test_devices_pool_generation_and_count_may_change() -> None:
    old = resource_slice(device())
    new = changed(changed(old, "spec.pool.generation", 2), "spec.devices", [device("dev-1")])
    assert lines(new, old) == []


def test_unchanged_capacity_and_taints_are_not_rechecked() -> None:
    """Stored values that later rules reject keep working while the device's other fields change."""
    old = resource_slice(
        device(
            capacity={"c": {"value": "1", "requestPolicy": {"default": "1"}}},
            taints=[{"key": "k", "effect": "FutureEffect"}],
        )
    )
    assert lines(old) == [
        f"{DEV}.capacity[c].requestPolicy: Forbidden: allowMultipleAllocations must be true",
        f'{DEV}.taints[0].effect: Unsupported value: "FutureEffect": supported values: "NoExecute", '
        '"NoSchedule", '
        '"None"',
    ]
    assert lines(changed(old, "spec.devices.0.attributes", {"a": {"int": 1}}), old) == []


def test_changed_taints_are_rechecked_in_full() -> None:
    old = resource_slice(device(taints=[{"key": "k", "effect": "FutureEffect"}]))
    new = changed(
        old, "spec.devices.0.taints", [{"key": "k", "effect": "FutureEffect"}, {"key": "j", "effect": "None"}]
    )
    assert lines(new, old) == [
        f'{DEV}.taints[0].effect: Unsupported value: "FutureEffect": supported values: "NoExecute", '
        '"NoSchedule", '
        '"None"'
    ]


def test_capacity_and_counter_values_default_to_zero() -> None:
    """DeviceCapacity.Value and Counter.Value are plain resource.Quantity fields: a missing one
    decodes as Go's zero Quantity ("0") and no validation rule requires it (validateDeviceCounter
    accepts any parsed quantity), so the API server stores 0 rather than rejecting the object."""
    obj = resource_slice(
        device(capacity={"mem": {}}, consumesCounters=[{"counterSet": "s", "counters": {"c": {}}}])
    )
    assert lines(obj) == []
    policy = {"default": "1", "validValues": ["1"]}
    assert lines(
        resource_slice(device(allowMultipleAllocations=True, capacity={"c": {"requestPolicy": policy}}))
    ) == [
        f'{DEV}.capacity[c].requestPolicy.validValues[0]: Invalid value: "1": '
        "option is larger than capacity value: 0"
    ]
