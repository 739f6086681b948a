"""Bad values that the API server prints with Go's ``%#v``.

``field.Error.ErrorBody`` (apimachinery ``util/validation/field/errors.go``) prints numbers, booleans
and strings plainly, a ``fmt.Stringer`` through ``String()``, and anything else, structs and slices of
the *internal* API types among them, with ``%#v``: ``[]bool{}``, ``[]string(nil)``,
``core.NodeSelectorTerm{MatchExpressions:..., MatchFields:...}``. Where such a value holds no
pointer, the text is fully determined by the object and is reproduced here exactly. A non-nil
pointer prints as its address, which is different in every API server process; it is shown as
:data:`POINTER` so the shape of the line still matches.

The values are built by the validators from the models they already hold, typed by the Go type the
API server would have passed (``[]int64`` for ``ints``, ``core.NodeSelectorTerm`` for a term...).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policies.api.base import NodeSelectorRequirement, NodeSelectorTerm
from policies.validation.fielderrors import go_quote

# What a non-nil pointer prints as: a plausible heap address (the real one is not reproducible).
POINTER = "0xc000000000"


@dataclass(frozen=True)
class GoSyntax:
    """A value already rendered as ``%#v`` would; printed verbatim in an error line."""

    text: str

    def __str__(self) -> str:
        return self.text


def slice_of(elem_type: str, items: Iterable[str] | None) -> str:
    """``[]T(nil)`` for a nil slice, ``[]T{}`` for an empty one, ``[]T{a, b}`` otherwise."""
    if items is None:
        return f"[]{elem_type}(nil)"
    return f"[]{elem_type}{{{', '.join(items)}}}"


def struct(type_name: str, fields: Sequence[tuple[str, str]]) -> str:
    return f"{type_name}{{{', '.join(f'{name}:{value}' for name, value in fields)}}}"


def pointer(elem_type: str, is_set: bool) -> str:
    return f"(*{elem_type})({POINTER if is_set else 'nil'})"


def strings(values: Sequence[str] | None) -> str:
    return slice_of("string", None if values is None else [go_quote(v) for v in values])


def ints(values: Sequence[int] | None) -> str:
    return slice_of("int64", None if values is None else [str(v) for v in values])


def bools(values: Sequence[bool] | None) -> str:
    return slice_of("bool", None if values is None else ["true" if v else "false" for v in values])


def _requirement(req: NodeSelectorRequirement) -> str:
    return struct(
        "core.NodeSelectorRequirement",
        [("Key", go_quote(req.key)), ("Operator", go_quote(req.operator)), ("Values", strings(req.values))],
    )


def _requirements(reqs: Sequence[NodeSelectorRequirement] | None) -> str:
    return slice_of("core.NodeSelectorRequirement", None if reqs is None else [_requirement(r) for r in reqs])


def node_selector_term(term: NodeSelectorTerm) -> str:
    return struct(
        "core.NodeSelectorTerm",
        [
            ("MatchExpressions", _requirements(term.match_expressions)),
            ("MatchFields", _requirements(term.match_fields)),
        ],
    )


def node_selector_terms(terms: Sequence[NodeSelectorTerm] | None) -> GoSyntax:
    """``[]core.NodeSelectorTerm{...}`` as the slice node-selector check prints it."""
    return GoSyntax(
        slice_of("core.NodeSelectorTerm", None if terms is None else [node_selector_term(t) for t in terms])
    )
