"""Standard objects of upstream's allocator test table (dra-reference 5.1), as draguard models.

Upstream's ``allocator_testing.go`` builds every case from a handful of shared objects: two nodes
that differ only in their region label, and two device classes that each select one driver.
The case files under ``tests/allocator/cases/`` refer to them by name (``node: node-2``,
``classes: [class-a]``) instead of repeating them, which keeps the ~220 cases readable and
guarantees that every case sees exactly the same fixture.
"""

from __future__ import annotations

from typing import Any

from policies.api.core import Node
from policies.api.kinds import decode
from policies.api.resource import API_VERSION, DeviceClass

# Upstream replaces every generated shareID with this value before comparing results.
FIXED_SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"

# Labels of the two standard nodes: same planet, different region.
NODE_REGIONS = {"node-1": "region-1", "node-2": "region-2"}

# Standard classes: each selects the devices of one driver.
CLASS_DRIVERS = {"class-a": "driver-a", "class-b": "driver-b"}


def node_json(name: str, region: str) -> dict[str, Any]:
    """A node labelled with its region and ``planet: earth`` (upstream's ``node()`` helper)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"region": region, "planet": "earth"}},
    }


def class_json(name: str, driver: str) -> dict[str, Any]:
    """A class whose only selector picks ``driver`` (upstream's ``class()`` helper)."""
    expression = f'device.driver == "{driver}"'
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def standard_node(name: str) -> Node:
    """``node-1`` or ``node-2``; any other name is a case-file mistake and says so."""
    if name not in NODE_REGIONS:
        raise ValueError(f"node: unknown standard node {name!r}; use one of {sorted(NODE_REGIONS)} "
                         "or write a full Node object")
    node = decode(node_json(name, NODE_REGIONS[name]))
    assert isinstance(node, Node)
    return node


def standard_class(name: str) -> DeviceClass:
    """``class-a`` or ``class-b``; any other name is a case-file mistake and says so."""
    if name not in CLASS_DRIVERS:
        raise ValueError(f"classes: unknown standard class {name!r}; use one of {sorted(CLASS_DRIVERS)} "
                         "or write a full DeviceClass object")
    device_class = decode(class_json(name, CLASS_DRIVERS[name]))
    assert isinstance(device_class, DeviceClass)
    return device_class
