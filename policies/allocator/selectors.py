"""CEL selectors as the allocator evaluates them: compiled once, bound once per device, cached.

Upstream compiles through a shared ``cel.Cache`` on first use (``selectorsMatch`` in
``structured/internal/incubating/allocator_incubating.go``), so a broken selector only fails once
a device is actually checked against it. A result depends only on the expression and the device,
so it is kept on the device for the Allocator's lifetime; a ``SelectorCache`` shared between
Allocators (one per cluster snapshot) carries bindings and results across snapshots too.
"""

from __future__ import annotations

from policies.allocator.devices import DeviceInfo
from policies.cel import (
    CompileError,
    DeviceBinding,
    Environment,
    EvalError,
    Program,
    SelectorCache,
    bind_device,
    compile_expression,
)


class SelectorEngine:
    """Compiles expressions and evaluates them against devices, caching both."""

    def __init__(self, list_type_attributes: bool, cache: SelectorCache | None = None) -> None:
        if cache is not None and cache.env.list_type_attributes != list_type_attributes:
            raise ValueError(
                "cel_cache: its Environment must use list_type_attributes="
                f"{list_type_attributes} like the allocator's features"
            )
        self._env = cache.env if cache is not None else Environment("stored", list_type_attributes)
        self._cache = cache
        self._programs: dict[str, Program | CompileError] = {}
        self._bindings: dict[int, DeviceBinding] = {}

    def compile(self, expression: str) -> Program:
        """The compiled program; raises CompileError (remembered, so it is raised every time)."""
        program = self._programs.get(expression)
        if program is None:
            try:
                program = compile_expression(expression, self._env)
            except CompileError as err:
                program = err
            self._programs[expression] = program
        if isinstance(program, CompileError):
            raise program
        return program

    def matches(self, expression: str, device: DeviceInfo) -> bool:
        """Whether the device satisfies the expression; raises CompileError or EvalError."""
        cached = device.cel.get(expression)
        if cached is None:
            program = self.compile(expression)
            try:
                cached = self._evaluate(program, device)
            except EvalError as err:
                cached = err
            device.remember_cel(expression, cached)
        if isinstance(cached, Exception):
            raise cached
        return cached

    def _evaluate(self, program: Program, device: DeviceInfo) -> bool:
        if self._cache is not None:
            generation = device.slice.obj.metadata.generation
            binding = self._cache.bind(device.driver, device.pool_name, device.device, generation)
            return self._cache.matches(program, binding)
        own = self._bindings.get(device.index)
        if own is None:
            own = self._bindings[device.index] = bind_device(
                device.driver, device.device, self._env, pool=device.pool_name
            )
        return program.matches(own)
