"""Selector results cached per device binding, invalidated when the device's slice changes."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from policies.cel.binding import DeviceBinding, bind_device
from policies.cel.environment import DEFAULT_ENVIRONMENT, Environment
from policies.cel.program import Program

if TYPE_CHECKING:
    from policies.api.resource import Device


class SelectorCache:
    """Bindings by (driver, pool, device, slice generation) and, inside each, results by program.

    A new generation of a slice replaces the bindings of its devices, so stale results can never
    be returned. Errors are cached too (the same device fails the same way every time).
    """

    def __init__(self, env: Environment = DEFAULT_ENVIRONMENT, max_devices: int = 200_000) -> None:
        self.env = env
        self.max_devices = max_devices
        # (driver, pool, device) -> (generation, the Device object, its binding)
        self._bindings: OrderedDict[tuple[str, str, str], tuple[int | None, Device, DeviceBinding]] = (
            OrderedDict()
        )

    def bind(self, driver: str, pool: str, device: Device, generation: int | None = None) -> DeviceBinding:
        """The binding of a device, rebuilt only when the slice changed: a different ``generation``
        (the slice's metadata.generation) or, when the generation is unknown, a different Device
        object (models are immutable, so a changed slice is a new object)."""
        key = (driver, pool, device.name)
        found = self._bindings.get(key)
        if found is not None:
            same = found[0] == generation if generation is not None else found[1] is device
            if same:
                return found[2]
        binding = bind_device(driver, device, self.env, pool=pool)
        self._bindings[key] = (generation, device, binding)
        if len(self._bindings) > self.max_devices:
            self._bindings.popitem(last=False)
        return binding

    def matches(self, program: Program, binding: DeviceBinding) -> bool:
        """program.matches(binding), memoised in the binding; errors are re-raised each time."""
        results = binding.results
        found = results.get(program)
        if found is None:
            try:
                found = program.matches(binding)
            except Exception as exc:
                found = exc
            results[program] = found
        if isinstance(found, Exception):
            raise found
        return found

    def invalidate(self, driver: str, pool: str | None = None) -> None:
        """Drop the bindings of a driver (or one of its pools), e.g. when a slice is deleted."""
        for key in [k for k in self._bindings if k[0] == driver and (pool is None or k[1] == pool)]:
            del self._bindings[key]
