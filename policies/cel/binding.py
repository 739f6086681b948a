"""The ``device`` variable of a DRA selector, built once per device and reused by every selector.

Upstream (``k8s.io/dynamic-resource-allocation/cel/compile.go``, ``DeviceMatches``) rebuilds the
attribute and capacity maps on every evaluation; the result only depends on the device, so here it
is built once. Conversion errors (an attribute without a value, a list attribute while
DRAListTypeAttributes is off, a version that is not semver 2.0.0) are kept and raised by every
evaluation, because upstream reports them when a selector runs, not when the slice is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from policies.cel.environment import DEFAULT_ENVIRONMENT, Environment
from policies.cel.library import CELEvalError, Semver
from policies.cel.library.semver import parse_semver

if TYPE_CHECKING:
    from policies.api.resource import Device, DeviceAttribute


@dataclass(slots=True)
class DeviceBinding:
    """One device as CEL sees it: ``attributes[domain][id]``, ``capacity[domain][id]``.

    ``error`` is the conversion error every evaluation on this device reports.
    ``results`` memoises selector results by expression and environment (see ``SelectorCache``),
    and ``results_chars`` is the length of those expressions, which bounds it.
    """

    driver: str
    name: str
    pool: str
    allow_multiple_allocations: bool
    attributes: dict[str, dict[str, Any]]
    capacity: dict[str, dict[str, Any]]
    error: str | None = None
    results: dict[object, bool | Exception] = field(default_factory=dict)
    results_chars: int = 0

    @property
    def device_id(self) -> str:
        """``driver/pool/device`` as the allocator and the webhook name devices."""
        return f"{self.driver}/{self.pool}/{self.name}"


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """Domain and id of an attribute or capacity name; no domain means the driver's."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(attribute: DeviceAttribute, list_types: bool) -> Any:
    """The CEL value of one attribute, in the order upstream's getAttributeValue checks members."""
    if list_types:
        for values in (attribute.ints, attribute.bools, attribute.strings):
            if values is not None:
                return list(values)
        if attribute.versions is not None:
            return [_semver(v) for v in attribute.versions]
    for scalar in (attribute.int_, attribute.bool_, attribute.string):
        if scalar is not None:
            return scalar
    if attribute.version is not None:
        return _semver(attribute.version)
    raise ValueError("unsupported attribute value")


# Converted versions by attribute object. A cluster's devices share their equal attribute objects
# (policies.api.base.share_values: 40,000 GPUs hold a few hundred distinct values), so most
# conversions become a lookup. An entry holds the attribute itself, so that its id cannot be reused
# by another object while the entry lives. Only versions are kept: a string, int or bool is read
# off the attribute as fast as it is looked up, and each device's own ones (uuid, PCI address) made
# 40,000 entries (4 MiB) that no other device would ask for; lists are copied per device.
_SCALARS: dict[tuple[int, bool], tuple[DeviceAttribute, Any]] = {}
_SCALARS_MAX = 65_536


def _converted(attribute: DeviceAttribute, list_types: bool) -> Any:
    """:func:`_attribute_value`, remembered per attribute object; raises ValueError the same."""
    key = (id(attribute), list_types)
    found = _SCALARS.get(key)
    if found is not None and found[0] is attribute:
        return found[1]
    value = _attribute_value(attribute, list_types)
    if isinstance(value, Semver):
        if len(_SCALARS) >= _SCALARS_MAX:
            _SCALARS.clear()
        _SCALARS[key] = (attribute, value)
    return value


def converts(device: Device, list_types: bool) -> bool:
    """Whether every attribute of the device converts (else its binding carries the error that
    every evaluation reports)."""
    try:
        for attribute in (device.attributes or {}).values():
            _converted(attribute, list_types)
    except ValueError:
        return False
    return True


def entry(driver: str, device: Device, section: str, domain: str, ident: str, list_types: bool) -> Any:
    """One attribute's (``section`` ``attributes``) or capacity's value as the device's binding holds
    it, read off the device: the last of its names that qualify to ``domain``/``ident``, ``absent``
    when none does. The device's attributes must convert (:func:`converts`)."""
    found: Any = ABSENT
    if section == "attributes":
        for name, attribute in (device.attributes or {}).items():
            if split_qualified_name(name, driver) == (domain, ident):
                found = _converted(attribute, list_types)
        return found
    for name, capacity in (device.capacity or {}).items():
        if split_qualified_name(name, driver) == (domain, ident):
            found = capacity.value
    return found


ABSENT: Any = object()


@lru_cache(maxsize=4096)
def _semver(text: str) -> Semver:
    """One (frozen) Semver per version text: a fleet's devices repeat a few driver and compute
    capability versions, bound once per device (40,000 at 5,000 nodes)."""
    try:
        return parse_semver(text)
    except CELEvalError as exc:
        raise ValueError(f"parse semantic version: {exc}") from None


def bind_device(
    driver: str, device: Device, env: Environment = DEFAULT_ENVIRONMENT, *, pool: str = ""
) -> DeviceBinding:
    """Build the ``device`` variable for one device of a slice of ``driver`` (and ``pool``)."""
    attributes: dict[str, dict[str, Any]] = {}
    error: str | None = None
    for name, attribute in (device.attributes or {}).items():
        try:
            value = _converted(attribute, env.list_type_attributes)
        except ValueError as exc:
            error = error or f"attribute {name}: {exc}"
            continue
        domain, ident = split_qualified_name(name, driver)
        attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in (device.capacity or {}).items():
        domain, ident = split_qualified_name(name, driver)
        capacity.setdefault(domain, {})[ident] = cap.value
    return DeviceBinding(
        driver=driver,
        name=device.name,
        pool=pool,
        allow_multiple_allocations=bool(device.allow_multiple_allocations),
        attributes=attributes,
        capacity=_shared(capacity),
        error=error,
    )


# Capacity maps already in use, by what they hold: the devices of one model publish the same
# capacities (80Gi of memory), and 40,000 bindings each kept two dicts of their own (18 MiB).
_CAPACITIES: dict[tuple[tuple[str, str, str], ...], dict[str, dict[str, Any]]] = {}
_CAPACITIES_KEPT = 4096


def _shared(capacity: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """An equal capacity map already in use, else ``capacity`` (kept for the next device). The
    maps are never changed once bound; equal is by domain, name and the quantity's text."""
    key = tuple((domain, name, str(value)) for domain, ids in capacity.items() for name, value in ids.items())
    found = _CAPACITIES.get(key)
    if found is not None:
        return found
    if len(_CAPACITIES) >= _CAPACITIES_KEPT:
        _CAPACITIES.clear()
    _CAPACITIES[key] = capacity
    return capacity
