"""Upstream's allocator test table, run against draguard's allocator.

The cases live in ``cases/*.yaml`` (the format is described at the top of each file and checked
by :func:`load_cases`), one file per subsection of dra-reference section 5, ported from
``allocator_testing.go`` and ``lexicographical_testing.go`` in
``k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting`` (Kubernetes 1.36).
This module turns each case into one pytest test named after the upstream case and checks what
upstream's ``RunTestAllocator`` checks:

* the error (a substring of its message) or its absence;
* the results, compared like upstream's gomega matchers (see :func:`comparable`);
* that the allocator did not modify its inputs;
* the number of ``allocateOne`` invocations, when the case gives one.

Comparison is on the API JSON form. A null field equals an absent one (a Go nil pointer is simply
absent), but an empty list or map stays distinct from an absent one, as reflect.DeepEqual keeps nil
and empty slices apart; consumedCapacity quantities are compared by value. Results are compared
unordered across claims, as upstream's ``ConsistOf`` does.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import FIXED_SHARE_ID, standard_class, standard_node

from policies.allocator import AllocatedState, AllocationOutcome, Allocator, DeviceID, Features
from policies.api.base import TypedObject
from policies.api.core import Node
from policies.api.kinds import decode
from policies.api.quantity import Quantity
from policies.api.resource import API_VERSION, AllocationResult, DeviceClass, ResourceClaim, ResourceSlice

CASES_DIR = Path(__file__).resolve().parent / "cases"

# How many cases dra-reference section 5 lists per subsection, i.e. per case file. A file with a
# different number has dropped (or invented) a case.
EXPECTED_CASE_COUNTS = {
    "basic.yaml": 28,  # 5.2, cases 1-28
    "all_mode.yaml": 23,  # 5.3, cases 29-51
    "node_selection.yaml": 4,  # 5.4, cases 52-55
    "match_attribute.yaml": 9,  # 5.5, cases 56-64
    "config.yaml": 6,  # 5.6, cases 65-70
    "prioritized_list.yaml": 20,  # 5.7, cases 71-90
    "partitionable.yaml": 23,  # 5.8, cases 91-113
    "taints.yaml": 13,  # 5.9, cases 114-126
    "binding_conditions.yaml": 11,  # 5.10, cases 127-137
    "consumable_capacity.yaml": 36,  # 5.11, cases 138-173
    "distinct_attribute.yaml": 6,  # 5.12, cases 174-179
    "list_attributes.yaml": 23,  # 5.13, cases 180-202
    "pools.yaml": 10,  # 5.14, cases 203-212
    "search_effort.yaml": 7,  # 5.15, cases 213-219
    "lexicographical.yaml": 4,  # 5.16, cases 220-223
}

FILE_KEYS = {"fixtures", "cases"}
CASE_KEYS = {
    "name", "features", "node", "classes", "claims", "slices", "allocatedDevices",
    "allocatedSharedDevices", "allocatedCapacity", "expect", "shareIDs",
}
EXPECT_KEYS = {"results", "compare", "error", "invocations"}
COMPARE_MODES = {"unordered", "exact"}


class CaseError(ValueError):
    """A case file that does not follow the format; the message names the file, case and field."""


# --- reading case files ------------------------------------------------------------------------------


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of one file, with their keys checked so that a typo cannot silently drop input."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise CaseError(f"{path.name}: not valid YAML: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise CaseError(f"{path.name}: must be a mapping with a 'cases' list")
    check_keys(f"{path.name}", data, FILE_KEYS)
    for index, case in enumerate(data["cases"]):
        where = f"{path.name}: cases[{index}]"
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            raise CaseError(f"{where}: must be a mapping with a string 'name'")
        check_keys(f"{path.name}: {case['name']}", case, CASE_KEYS)
        check_keys(f"{path.name}: {case['name']}: expect", case.get("expect") or {}, EXPECT_KEYS)
    return data["cases"]


def check_keys(where: str, data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise CaseError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def case_params() -> Iterator[Any]:
    """One pytest param per case, or one failing param for a file that cannot be read."""
    for path in sorted(CASES_DIR.glob("*.yaml")):
        try:
            cases = load_cases(path)
        except CaseError as err:
            yield pytest.param(err, id=f"{path.name}-unreadable")
            continue
        for case in cases:
            yield pytest.param(case, id=case["name"])


# --- building the allocator's inputs -----------------------------------------------------------------


def decode_as(data: Any, api_version: str, kind: str, where: str) -> TypedObject:
    """Decode an object, adding apiVersion/kind when the case leaves them out to stay short."""
    if not isinstance(data, dict):
        raise CaseError(f"{where}: must be an object, got {type(data).__name__}")
    return decode({"apiVersion": api_version, "kind": kind, **data})


def build_node(case: dict[str, Any]) -> Node | None:
    """Upstream runs a case without a node on node-1; an explicit null means "no node"."""
    value = case.get("node", "node-1")
    if value is None:
        return None
    if isinstance(value, str):
        return standard_node(value)
    node = decode_as(value, "v1", "Node", "node")
    assert isinstance(node, Node)
    return node


def build_classes(case: dict[str, Any]) -> dict[str, DeviceClass]:
    classes: dict[str, DeviceClass] = {}
    for index, item in enumerate(case.get("classes") or []):
        if isinstance(item, str):
            device_class = standard_class(item)
        else:
            decoded = decode_as(item, API_VERSION, "DeviceClass", f"classes[{index}]")
            assert isinstance(decoded, DeviceClass)
            device_class = decoded
        classes[device_class.name] = device_class
    return classes


def decode_all(case: dict[str, Any], key: str, model: type[TypedObject]) -> list[Any]:
    """The objects under ``key``, each decoded as ``model`` (claims or slices)."""
    objects = [decode_as(item, API_VERSION, model.__name__, f"{key}[{i}]")
               for i, item in enumerate(case.get(key) or [])]
    assert all(isinstance(o, model) for o in objects)
    return objects


def split_id(text: str, extra_parts: int, field: str) -> tuple[DeviceID, list[str]]:
    """``driver/pool/device[/more]`` -> DeviceID and the trailing parts; pool names may contain '/'."""
    parts = str(text).split("/")
    if len(parts) < 3 + extra_parts:
        raise CaseError(f"{field}: {text!r} must look like driver/pool/device" + "/shareID" * extra_parts)
    head, tail = parts[: len(parts) - extra_parts], parts[len(parts) - extra_parts :]
    return DeviceID(driver=head[0], pool="/".join(head[1:-1]), device=head[-1]), tail


def build_allocated_state(case: dict[str, Any]) -> AllocatedState:
    devices = frozenset(split_id(d, 0, "allocatedDevices")[0] for d in case.get("allocatedDevices") or [])
    shared_ids = (split_id(d, 1, "allocatedSharedDevices") for d in case.get("allocatedSharedDevices") or [])
    shared = frozenset((device, tail[0]) for device, tail in shared_ids)
    capacity = {
        split_id(d, 0, "allocatedCapacity")[0]: {name: Quantity.parse(str(q)) for name, q in amounts.items()}
        for d, amounts in (case.get("allocatedCapacity") or {}).items()
    }
    return AllocatedState(
        allocated_devices=devices, allocated_shared_device_ids=shared, aggregated_capacity=capacity
    )


def build_features(case: dict[str, Any]) -> Features:
    """Exactly the case's features, all others off (upstream's zero ``Features{}``)."""
    names = case.get("features") or []
    return Features.parse(",".join(names)) if names else Features.none()


def share_id_factory() -> Callable[[], str]:
    """Distinct, reproducible UUIDs so that a failing case prints the same output every run."""
    counter = itertools.count(1)
    return lambda: f"00000000-0000-4000-8000-{next(counter):012x}"


@dataclass(frozen=True)
class Inputs:
    features: Features
    node: Node | None
    classes: dict[str, DeviceClass]
    claims: list[ResourceClaim]
    slices: list[ResourceSlice]
    allocated: AllocatedState

    @classmethod
    def of(cls, case: dict[str, Any]) -> Inputs:
        return cls(
            features=build_features(case),
            node=build_node(case),
            classes=build_classes(case),
            claims=decode_all(case, "claims", ResourceClaim),
            slices=decode_all(case, "slices", ResourceSlice),
            allocated=build_allocated_state(case),
        )

    def snapshot(self) -> str:
        """Everything the allocator could touch, as text, to prove it left its inputs alone."""
        objects: list[TypedObject] = [*self.classes.values(), *self.claims, *self.slices]
        if self.node is not None:
            objects.append(self.node)
        state = {
            "devices": sorted(map(str, self.allocated.allocated_devices)),
            "shared": sorted(f"{d}/{s}" for d, s in self.allocated.allocated_shared_device_ids),
            "capacity": {
                str(d): {k: str(q) for k, q in sorted(v.items())}
                for d, v in sorted(self.allocated.aggregated_capacity.items(), key=lambda i: str(i[0]))
            },
        }
        return json.dumps([[o.to_json() for o in objects], state], sort_keys=True)

    def allocate(self) -> AllocationOutcome:
        allocator = Allocator(
            self.features, self.allocated, self.classes, self.slices, new_share_id=share_id_factory()
        )
        return allocator.allocate(self.node, self.claims)


# --- comparing results ---------------------------------------------------------------------------


def without_nulls(value: Any) -> Any:
    """Drop null members: a Go nil pointer and an absent field are the same thing."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def by_value(quantity: str) -> str:
    """A quantity as its exact value, so that ``2Gi`` and ``2147483648`` compare equal."""
    return str(Quantity.parse(quantity).as_fraction())


def unordered_selector(selector: dict[str, Any]) -> dict[str, Any]:
    """Terms, requirements and values in a canonical order (upstream's matchNodeSelector)."""

    def requirement(req: dict[str, Any]) -> dict[str, Any]:
        return {**req, "values": sorted(req["values"])} if "values" in req else req

    def term(t: dict[str, Any]) -> dict[str, Any]:
        return {k: sorted(map(requirement, reqs), key=sort_key) for k, reqs in t.items()}

    terms = selector.get("nodeSelectorTerms", [])
    return {**selector, "nodeSelectorTerms": sorted(map(term, terms), key=sort_key)}


def comparable(result: AllocationResult, mode: str, fixed_share_ids: bool) -> dict[str, Any]:
    """One claim's result in the form both sides are compared in.

    consumedCapacity quantities are compared by value (the case files spell them as upstream's
    helpers do, not necessarily in the allocator's format); with ``fixed_share_ids`` every shareID
    becomes upstream's fixed UUID. In unordered mode device results and the node selector lose their
    order, and a config is an error, as in upstream's ``allocationResult()`` matcher.
    """
    data = without_nulls(result.model_dump(mode="json", by_alias=True))
    devices = data.get("devices", {})
    for device in devices.get("results", []):
        if fixed_share_ids and "shareID" in device:
            device["shareID"] = FIXED_SHARE_ID
        if "consumedCapacity" in device:
            consumed = device["consumedCapacity"].items()
            device["consumedCapacity"] = {name: by_value(q) for name, q in consumed}
    if mode == "unordered":
        assert "config" not in devices, f"unordered comparison expects no config, got {devices['config']}"
        if "results" in devices:
            devices["results"] = sorted(devices["results"], key=sort_key)
        if "nodeSelector" in data:
            data["nodeSelector"] = unordered_selector(data["nodeSelector"])
    return data


def expected_results(case: dict[str, Any]) -> list[AllocationResult] | None:
    raw = case["expect"].get("results")
    if raw is None:
        return None
    if len(raw) != len(case.get("claims") or []):
        raise CaseError(f"{case['name']}: expect.results needs one result per claim")
    return [AllocationResult.model_validate(r) for r in raw]


def check_results(case: dict[str, Any], outcome: AllocationOutcome) -> None:
    expect = case["expect"]
    wanted = expected_results(case)
    if wanted is None:
        # Without claims there is nothing to allocate and an empty list is as good as "none".
        assert outcome.results is None or (outcome.results == [] and not case.get("claims")), (
            f"expected no results, got {[r.to_json() for r in outcome.results or []]}"
        )
        return
    assert outcome.results is not None, f"expected results, got none (explanation: {outcome.explanation})"
    mode = expect.get("compare", "unordered")
    if mode not in COMPARE_MODES:
        raise CaseError(f"{case['name']}: expect.compare is one of {sorted(COMPARE_MODES)}, not {mode!r}")
    fixed = case.get("shareIDs") == "fixed"
    actual = sorted((comparable(r, mode, fixed) for r in outcome.results), key=sort_key)
    expected = sorted((comparable(r, mode, False) for r in wanted), key=sort_key)
    assert actual == expected


def check_error(case: dict[str, Any], outcome: AllocationOutcome) -> None:
    wanted = case["expect"].get("error")
    if wanted is None:
        assert outcome.error is None, f"unexpected error: {outcome.error}"
    else:
        assert outcome.error is not None, f"expected an error containing {wanted!r}, got none"
        assert wanted in str(outcome.error)


# --- tests -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(case_params()))
def test_upstream_case(case: dict[str, Any] | CaseError) -> None:
    if isinstance(case, CaseError):
        pytest.fail(str(case))
    case["expect"] = case.get("expect") or {}
    inputs = Inputs.of(case)
    before = inputs.snapshot()

    outcome = inputs.allocate()

    check_error(case, outcome)
    check_results(case, outcome)
    assert inputs.snapshot() == before, "the allocator modified its inputs"
    invocations = case["expect"].get("invocations")
    if invocations is not None:
        assert outcome.invocations == invocations


@pytest.mark.parametrize("file_name", sorted(EXPECTED_CASE_COUNTS))
def test_case_file_has_every_case_of_its_section(file_name: str) -> None:
    path = CASES_DIR / file_name
    assert path.exists(), f"{file_name} is missing"
    assert len(load_cases(path)) == EXPECTED_CASE_COUNTS[file_name]


def test_case_files_are_known_and_names_unique() -> None:
    files = sorted(CASES_DIR.glob("*.yaml"))
    stray = sorted({f.name for f in files} - set(EXPECTED_CASE_COUNTS))
    assert not stray, f"case files not listed in EXPECTED_CASE_COUNTS: {stray}"
    names = [case["name"] for f in files for case in load_cases(f)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"case names must be unique: {duplicates}"


def test_unordered_comparison_ignores_order_but_not_content() -> None:
    """The comparison itself must be able to fail, or every case would pass vacuously."""

    def result(values: list[str], devices: list[str]) -> AllocationResult:
        return AllocationResult.model_validate({
            "devices": {"results": [{"request": "req-0", "driver": "driver-a", "pool": "pool-1", "device": d}
                                    for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "region", "operator": "In", "values": values}]}]},
        })

    a = comparable(result(["r1", "r2"], ["device-1", "device-2"]), "unordered", False)
    b = comparable(result(["r2", "r1"], ["device-2", "device-1"]), "unordered", False)
    c = comparable(result(["r1", "r3"], ["device-1", "device-2"]), "unordered", False)
    assert a == b
    assert a != c
    assert comparable(result(["r1"], ["device-1", "device-2"]), "exact", False) != comparable(
        result(["r1"], ["device-2", "device-1"]), "exact", False)


def test_consumed_capacity_compares_by_value_and_share_ids_are_pinned() -> None:
    def result(amount: str, share_id: str) -> AllocationResult:
        return AllocationResult.model_validate({"devices": {"results": [{
            "request": "req-0", "driver": "driver-a", "pool": "pool-1", "device": "device-1",
            "shareID": share_id, "consumedCapacity": {"capacity-0": amount}}]}})

    generated = "00000000-0000-4000-8000-000000000001"
    pinned = comparable(result("2Gi", FIXED_SHARE_ID), "unordered", False)
    assert comparable(result("2147483648", generated), "unordered", True) == pinned
    assert comparable(result("2G", FIXED_SHARE_ID), "unordered", False) != pinned
    assert comparable(result("2Gi", generated), "unordered", False) != pinned
