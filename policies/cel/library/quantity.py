"""The Kubernetes Quantity library (``staging/src/k8s.io/apiserver/pkg/cel/library/quantity.go``).

1.36 declares ``quantity``, ``isQuantity``, the global ``sign(q)`` (there is no ``q.sign()``
overload, whatever the upstream doc comment shows), ``isInteger``, ``asInteger``,
``asApproximateFloat``, ``add``/``sub`` (Quantity or int), ``isGreaterThan``, ``isLessThan`` and
``compareTo``. Parse errors are ``resource.ParseQuantity``'s texts, as ``policies.api.quantity``
words them. ``add``/``sub`` results are ``DerivedQuantity`` (Go pointers upstream), which changes
how ``==`` treats them; see ``values.DerivedQuantity``.
"""

from __future__ import annotations

from policies.api.quantity import Quantity, QuantityError
from policies.cel.library.cost import fixed, parse_traversal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.overload import Overload
from policies.cel.library.values import DerivedQuantity

Q = "Quantity"
_NOMINAL = fixed(1)
_PARSE = parse_traversal(0)


def quantity(text: str) -> Quantity:
    try:
        return Quantity.parse(text)
    except QuantityError as err:
        raise CELEvalError(str(err)) from None


def is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except QuantityError:
        return False
    return True


def add(q: Quantity, other: Quantity | int) -> DerivedQuantity:
    """add(Quantity) and add(int): an int is taken as a DecimalSI quantity (resource.NewQuantity)."""
    return DerivedQuantity.of(q.add(other if isinstance(other, Quantity) else Quantity.from_int(other)))


def sub(q: Quantity, other: Quantity | int) -> DerivedQuantity:
    return DerivedQuantity.of(q.sub(other if isinstance(other, Quantity) else Quantity.from_int(other)))


def as_integer(q: Quantity) -> int:
    if not q.is_integer():
        raise CELEvalError("cannot convert value to integer")
    return q.as_integer()


OVERLOADS: tuple[Overload, ...] = (
    Overload("quantity", "string_to_quantity", False, ("string",), Q, quantity, _PARSE),
    Overload("isQuantity", "is_quantity_string", False, ("string",), "bool", is_quantity, _PARSE),
    Overload("sign", "quantity_sign", False, (Q,), "int", Quantity.sign, _NOMINAL),
    Overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        True,
        (Q, Q),
        "bool",
        lambda a, b: a.cmp(b) == 1,
        _NOMINAL,
    ),
    Overload(
        "isLessThan", "quantity_is_less_than", True, (Q, Q), "bool", lambda a, b: a.cmp(b) == -1, _NOMINAL
    ),
    Overload("compareTo", "quantity_compare_to", True, (Q, Q), "int", Quantity.cmp, _NOMINAL),
    Overload(
        "asApproximateFloat",
        "quantity_get_float",
        True,
        (Q,),
        "double",
        Quantity.as_approximate_float,
        _NOMINAL,
    ),
    Overload("asInteger", "quantity_get_int", True, (Q,), "int", as_integer, _NOMINAL),
    Overload("isInteger", "quantity_is_integer", True, (Q,), "bool", Quantity.is_integer, _NOMINAL),
    Overload("add", "quantity_add", True, (Q, Q), Q, add, _NOMINAL),
    Overload("add", "quantity_add_int", True, (Q, "int"), Q, add, _NOMINAL),
    Overload("sub", "quantity_sub", True, (Q, Q), Q, sub, _NOMINAL),
    Overload("sub", "quantity_sub_int", True, (Q, "int"), Q, sub, _NOMINAL),
)
