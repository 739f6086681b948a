"""Selector results cached per device binding, invalidated when the device's slice changes.

The allocator checks the same selectors against the same devices on every Allocate call of a
snapshot (and across snapshots, as long as the slices did not change). Results therefore live in
the device's binding (``DeviceBinding.results``, by program), and bindings are kept by slice and
slice generation: a new generation builds new bindings, so a stale result can never be returned.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from policies.cel.binding import DeviceBinding, bind_device
from policies.cel.environment import DEFAULT_ENVIRONMENT, Environment
from policies.cel.program import Program
from policies.cel.stats import RESULTS

if TYPE_CHECKING:
    from policies.api.resource import Device, ResourceSlice

_MISS = object()
# The results a binding keeps are keyed by expression: without a bound, a client sending ever new
# long selectors grew the webhook by their source (and, when the keys were the programs, by the
# 0.7 MB each compiled program takes: issue 16). Past this much expression source, a binding forgets
# its results (a program's own memo by projection still answers most of them again cheaply).
RESULTS_CHARS = 64 * 1024


class SelectorCache:
    """Bindings by slice (or device) and generation, and inside each binding results by expression.

    Errors are cached too: the same device fails the same selector the same way every time.
    """

    def __init__(self, env: Environment = DEFAULT_ENVIRONMENT, max_devices: int = 200_000) -> None:
        self.env = env
        self.max_devices = max_devices
        # (driver, pool, device) -> (generation, the Device object, its binding)
        self._bindings: OrderedDict[tuple[str, str, str], tuple[int | None, Device, DeviceBinding]] = (
            OrderedDict()
        )
        # (driver, pool, slice name) -> (generation, the slice object, its devices' bindings)
        self._slices: OrderedDict[
            tuple[str, str, str], tuple[int | None, ResourceSlice, tuple[DeviceBinding, ...]]
        ]
        self._slices = OrderedDict()
        self._slice_devices = 0
        self._keys: dict[tuple[str, Environment], tuple[str, Environment]] = {}
        self._keys_chars = 0

    def bind(self, driver: str, pool: str, device: Device, generation: int | None = None) -> DeviceBinding:
        """The binding of a device, rebuilt only when the slice changed: a different ``generation``
        (the slice's metadata.generation) or, when the generation is unknown, a different Device
        object (models are immutable, so a changed slice is a new object)."""
        key = (driver, pool, device.name)
        found = self._bindings.get(key)
        if found is not None and (found[0] == generation if generation is not None else found[1] is device):
            return found[2]
        binding = bind_device(driver, device, self.env, pool=pool)
        self._bindings[key] = (generation, device, binding)
        if len(self._bindings) > self.max_devices:
            self._bindings.popitem(last=False)
        return binding

    def bind_slice(self, slc: ResourceSlice) -> tuple[DeviceBinding, ...]:
        """The bindings of all devices of a slice, in order; one lookup per slice when unchanged
        (same metadata.generation, or the same object when the generation is unknown)."""
        spec = slc.spec
        key = (spec.driver, spec.pool.name, slc.metadata.name or "")
        generation = slc.metadata.generation
        found = self._slices.get(key)
        if found is not None and (found[0] == generation if generation is not None else found[1] is slc):
            return found[2]
        bindings = tuple(
            bind_device(spec.driver, d, self.env, pool=spec.pool.name) for d in spec.devices or ()
        )
        if found is not None:
            self._slice_devices -= len(found[2])
        self._slices[key] = (generation, slc, bindings)
        self._slice_devices += len(bindings)
        while len(self._slices) > 1 and self._slice_devices > self.max_devices:
            self._slice_devices -= len(self._slices.popitem(last=False)[1][2])
        return bindings

    def matches(self, program: Program, binding: DeviceBinding) -> bool:
        """program.matches(binding), memoised in the binding; errors are re-raised each time."""
        # By what the program is, not the Program: a program the compile cache has let go is freed,
        # and compiled again it finds its results here.
        key = (program.expression, program.env)
        found = binding.results.get(key, _MISS)
        if found is _MISS:
            key = self._shared_key(key)
            try:
                found = program.matches(binding)
            except Exception as exc:
                # Without its traceback: the frames would hold the exception in a cycle, kept
                # (frozen by serve) long after the cache lets go of it.
                found = exc.with_traceback(None)
            if binding.results_chars > RESULTS_CHARS:
                binding.results.clear()
                binding.results_chars = 0
            binding.results[key] = found
            binding.results_chars += len(program.expression)
        else:
            RESULTS.hits += 1
        if isinstance(found, Exception):
            raise found
        return bool(found)

    def _shared_key(self, key: tuple[str, Environment]) -> tuple[str, Environment]:
        """One key object for the entries of every binding (a tuple per device was 4 MiB at 40,000
        devices), the keys kept as bounded as a binding's results."""
        found = self._keys.get(key)
        if found is None:
            if self._keys_chars > RESULTS_CHARS:
                self._keys.clear()
                self._keys_chars = 0
            found = self._keys[key] = key
            self._keys_chars += len(key[0])
        return found

    def invalidate(self, driver: str, pool: str | None = None) -> None:
        """Drop the bindings of a driver (or one of its pools), e.g. when a slice is deleted."""
        for key in [k for k in self._bindings if k[0] == driver and (pool is None or k[1] == pool)]:
            del self._bindings[key]
        for key in [k for k in self._slices if k[0] == driver and (pool is None or k[1] == pool)]:
            self._slice_devices -= len(self._slices.pop(key)[2])
