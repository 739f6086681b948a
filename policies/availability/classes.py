"""Which devices a DeviceClass admits: its CEL selectors, as the scheduler evaluates them.

A device belongs to a class when every selector of the class accepts it (upstream ``selectorsMatch``
in ``structured/internal/incubating/allocator_incubating.go``, in the "stored expressions" CEL
environment the scheduler uses). A selector that does not compile admits nothing; one that fails
on a device does not admit that device, and the failure is counted and the first one kept, since
the scheduler would abort a pod's scheduling on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.api.resource import Device, DeviceClass, ResourceSlice
from policies.cel import CompileError, DeviceBinding, EvalError, Program, SelectorCache, compile_expression


@dataclass(frozen=True)
class Admitted:
    """The positions (in the pool's device order) of the devices the class admits; ``failures``
    counts the devices its selectors failed on, ``failure`` is the first one's error."""

    positions: frozenset[int]
    failures: int = 0
    failure: str | None = None


class ClassSelectors:
    """A class's selectors compiled once; ``error`` is why one does not compile."""

    def __init__(self, device_class: DeviceClass, cache: SelectorCache) -> None:
        self.device_class = device_class
        self._cache = cache
        self.programs: list[Program] = []
        self.error: str | None = None
        for i, selector in enumerate(device_class.spec.selectors or ()):
            if selector.cel is None:
                continue
            try:
                self.programs.append(compile_expression(selector.cel.expression, cache.env))
            except CompileError as err:
                self.error = f"spec.selectors[{i}].cel.expression: {err}"
                return

    def admitted(self, slices: Sequence[ResourceSlice]) -> Admitted:
        """The devices of a pool's ``slices`` (in order) that the class admits."""
        if self.error is not None:
            return Admitted(frozenset())
        positions: list[int] = []
        failures = 0
        failure: str | None = None
        position = 0
        for slc in slices:
            lazy = _Bindings(slc, self._cache)
            for i, device in enumerate(slc.spec.devices or ()):
                try:
                    if all(self._matches(p, lazy, i, device) for p in self.programs):
                        positions.append(position)
                except EvalError as err:
                    failures += 1
                    failure = failure or str(err)
                position += 1
        return Admitted(frozenset(positions), failures, failure)

    def _matches(self, program: Program, lazy: _Bindings, i: int, device: Device) -> bool:
        """The program's result for a device: remembered, found without binding the device when it
        can be (most devices of a cluster), else evaluated on the device's binding."""
        known = program.known_result(lazy.driver, device)
        if known is not None:
            return known
        return self._cache.matches(program, lazy.binding(i))


class _Bindings:
    """A slice's device bindings, built on first need."""

    def __init__(self, slc: ResourceSlice, cache: SelectorCache) -> None:
        self.driver = slc.spec.driver
        self._slice = slc
        self._cache = cache
        self._built: tuple[DeviceBinding, ...] | None = None

    def binding(self, i: int) -> DeviceBinding:
        if self._built is None:
            self._built = self._cache.bind_slice(self._slice)
        return self._built[i]
