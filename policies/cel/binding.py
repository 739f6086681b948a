"""The ``device`` variable of a DRA selector: a view of the device that every selector reads.

Upstream (``k8s.io/dynamic-resource-allocation/cel/compile.go``, ``DeviceMatches``) builds the
attribute and capacity maps on every evaluation; here a selector's reads are looked up in the
device's model (the maps are built only for a selector that reads a whole one), and converted
values (semantic versions) are shared between devices. Conversion errors (an attribute without a
value, a list attribute while DRAListTypeAttributes is off, a version that is not semver 2.0.0) are
raised by every evaluation, because upstream reports them when a selector runs, not when the slice
is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from policies.cel.environment import DEFAULT_ENVIRONMENT, Environment
from policies.cel.library import CELEvalError, Semver
from policies.cel.library.semver import parse_semver

if TYPE_CHECKING:
    from policies.api.resource import Device, DeviceAttribute

T = TypeVar("T")


_UNCHECKED: Any = object()


@dataclass(slots=True, eq=False)
class DeviceBinding:
    """One device as CEL sees it: ``attributes[domain][id]``, ``capacity[domain][id]``, read off
    the Device model when a selector asks.

    The selector rule and the allocator keep a binding for every device of the cluster (40,000 at
    5,000 nodes). Building both maps for each took 21 us and kept about 600 bytes per device
    (24 MiB: most of what 400 reviews added to a replica at that size, issue 23), while a selector
    reads a few entries; those are looked up in the model (:meth:`value`), and the maps are built
    only for a selector that reads a whole one.

    ``error`` is the conversion error every evaluation on this device reports (worked out on first
    use). ``results`` memoises selector results by expression and environment (see
    ``SelectorCache``), and ``results_chars`` is the length of those expressions, which bounds it.
    """

    driver: str
    device: Device
    pool: str = ""
    list_types: bool = False
    results: dict[object, bool | Exception] = field(default_factory=dict)
    results_chars: int = 0
    _error: object = _UNCHECKED

    @property
    def name(self) -> str:
        return self.device.name

    @property
    def allow_multiple_allocations(self) -> bool:
        return bool(self.device.allow_multiple_allocations)

    @property
    def device_id(self) -> str:
        """``driver/pool/device`` as the allocator and the webhook name devices."""
        return f"{self.driver}/{self.pool}/{self.name}"

    @property
    def error(self) -> str | None:
        if self._error is _UNCHECKED:
            self._error = _conversion_error(self.device, self.list_types)
        return self._error  # type: ignore[return-value]

    @property
    def attributes(self) -> dict[str, dict[str, Any]]:
        """Every attribute that converts, by domain and id (the last of equal names winning)."""
        found: dict[str, dict[str, Any]] = {}
        for name, attribute in (self.device.attributes or {}).items():
            try:
                value = _converted(attribute, self.list_types)
            except ValueError:
                continue
            domain, ident = split_qualified_name(name, self.driver)
            found.setdefault(domain, {})[ident] = value
        return found

    @property
    def capacity(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for name, capacity in (self.device.capacity or {}).items():
            domain, ident = split_qualified_name(name, self.driver)
            found.setdefault(domain, {})[ident] = capacity.value
        return found

    def names(self, section: str) -> list[tuple[str, str]]:
        """The (domain, id) of every entry of ``section`` (``attributes`` or ``capacity``) that a
        selector can read, without building the maps."""
        if section == "attributes" and self.error is not None:  # only the ones that convert
            return [(domain, ident) for domain, ids in self.attributes.items() for ident in ids]
        named = (self.device.attributes if section == "attributes" else self.device.capacity) or {}
        return [split_qualified_name(name, self.driver) for name in named]

    def value(self, section: str, domain: str, ident: str) -> Any:
        """``section[domain][ident]`` (``ABSENT`` when the device has none); the device's
        attributes must convert (``error`` None)."""
        return entry(self.driver, self.device, section, domain, ident, self.list_types)


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
    return _conversion_error(device, list_types) is None


def entry(driver: str, device: Device, section: str, domain: str, ident: str, list_types: bool) -> Any:
    """One attribute's (``section`` ``attributes``) or capacity's value as CEL sees it, read off
    the device, ``ABSENT`` when it has none. The device's attributes must convert
    (:func:`converts`)."""
    if section == "attributes":
        attribute = _named(device.attributes or {}, driver, domain, ident)
        return ABSENT if attribute is None else _converted(attribute, list_types)
    capacity = _named(device.capacity or {}, driver, domain, ident)
    return ABSENT if capacity is None else capacity.value


def _named(named: Mapping[str, T], driver: str, domain: str, ident: str) -> T | None:
    """The entry of ``named`` whose name qualifies to ``domain``/``ident``: ``domain/ident``, or a
    bare ``ident`` when ``domain`` is the driver's; with both present, the one that comes last."""
    if "/" in domain:
        return None  # a name splits at its first "/": no domain holds one
    qualified = f"{domain}/{ident}"
    found = named.get(qualified)
    bare = named.get(ident) if domain == driver and "/" not in ident else None
    if bare is None:
        return found
    if found is None:
        return bare
    last = next(name for name in reversed(list(named)) if name in (qualified, ident))
    return named[last]


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
    """The ``device`` variable for one device of a slice of ``driver`` (and ``pool``)."""
    return DeviceBinding(driver, device, pool, env.list_type_attributes)


def _conversion_error(device: Device, list_types: bool) -> str | None:
    """The first attribute that does not convert, as every evaluation on the device reports it."""
    for name, attribute in (device.attributes or {}).items():
        try:
            _converted(attribute, list_types)
        except ValueError as exc:
            return f"attribute {name}: {exc}"
    return None
