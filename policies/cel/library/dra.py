"""``<x>.includes(y)``, the DRA function for list-typed attributes (DRAListTypeAttributes, 1.36).

``dynamic-resource-allocation/cel/compile.go`` (``includesFunc``, release-1.36): on a list, true
when one of the first 48 elements (ResourceSliceMaxAttributeValuesPerDevice) equals ``y``; when none
of them does and the list has a 49th element, a runtime error ("'includes' function cannot be
applied to lists longer than 48 values") instead of looking further. A match among the first 48
wins even on a longer list. On anything else, ``x == y``. An element comparison that errors counts
as "not equal". The estimate charges the 48-element bound; at run time the call costs cel-go's
default 1, because only the estimator knows the function.
"""

from __future__ import annotations

from typing import Any

from policies.cel.library.cost import fixed
from policies.cel.library.equality import value_equal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.overload import Overload

MAX_LIST_VALUES = 48  # resourceapi.ResourceSliceMaxAttributeValuesPerDevice


def includes(target: Any, item: Any) -> bool:
    if isinstance(target, list | tuple):
        for index, element in enumerate(target):
            if index >= MAX_LIST_VALUES:
                raise CELEvalError(
                    f"'includes' function cannot be applied to lists longer than {MAX_LIST_VALUES} values"
                )
            if value_equal(element, item) is True:
                return True
        return False
    return value_equal(target, item) is True


OVERLOADS: tuple[Overload, ...] = (
    Overload(
        "includes",
        "dra_includes_dyn_dyn",
        True,
        ("dyn", "dyn"),
        "bool",
        includes,
        fixed(MAX_LIST_VALUES, actual=1),
    ),
)
