"""The shape of one registry entry: a CEL overload implemented in Python."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policies.cel.library.cost import DEFAULT, CostRule


@dataclass(frozen=True)
class Overload:
    """One overload of a CEL function, as the type checker and both engines need it.

    ``params`` are CEL type names, the receiver first when ``member`` is true; ``impl`` takes the
    operands in the same order and raises ``CELEvalError`` for runtime errors.
    """

    function: str
    overload_id: str
    member: bool
    params: tuple[str, ...]
    result: str
    impl: Callable[..., Any]
    cost: CostRule = DEFAULT
