"""CEL types and cel-go's assignability rules, for draguard's own type checker.

The rules follow cel-go's checker (``checker/types.go``): ``dyn`` and ``any`` are assignable to
and from everything, type parameters unify with an occurs check and widen to the more general
type, ``null`` is assignable to object, optional, timestamp and duration types. The one place
``any`` and ``dyn`` differ is comprehension ranges (``dyn`` is allowed, ``any`` is not), which is
why DRA attributes (``any`` unless DRAListTypeAttributes is on) cannot be iterated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

# Kinds
PRIMITIVES = ("int", "uint", "double", "bool", "string", "bytes")
LIST, MAP, TYPE, OPAQUE, OBJECT, PARAM = "list", "map", "type", "opaque", "object", "param"


@dataclass(frozen=True)
class Type:
    """``kind`` is a primitive name, dyn, any, null_type, error, timestamp, duration, list, map,
    type, opaque (optional_type), object (DRADevice, Quantity...) or param (a type parameter)."""

    kind: str
    name: str = ""
    params: tuple[Type, ...] = ()

    def __str__(self) -> str:
        return format_type(self)


def _simple(kind: str) -> Type:
    return Type(kind, kind)


INT, UINT, DOUBLE, BOOL, STRING, BYTES = (_simple(k) for k in PRIMITIVES)
DYN, ANY, NULL, ERROR = _simple("dyn"), _simple("any"), _simple("null_type"), _simple("error")
TIMESTAMP, DURATION = _simple("timestamp"), _simple("duration")

# The Kubernetes object types (apiserver/pkg/cel: QuantityType, SemverType, URLType, IPType...).
QUANTITY = Type(OBJECT, "kubernetes.Quantity")
SEMVER = Type(OBJECT, "kubernetes.Semver")
URL = Type(OBJECT, "kubernetes.URL")
IP = Type(OBJECT, "net.IP")
CIDR = Type(OBJECT, "net.CIDR")
FORMAT = Type(OBJECT, "kubernetes.NamedFormat")
DEVICE = Type(OBJECT, "kubernetes.DRADevice")
OBJECTS = {"Quantity": QUANTITY, "Semver": SEMVER, "URL": URL, "IP": IP, "CIDR": CIDR, "Format": FORMAT}


def list_of(elem: Type) -> Type:
    return Type(LIST, "list", (elem,))


def map_of(key: Type, value: Type) -> Type:
    return Type(MAP, "map", (key, value))


def optional_of(value: Type) -> Type:
    return Type(OPAQUE, "optional_type", (value,))


def type_of(t: Type) -> Type:
    return Type(TYPE, "type", (t,))


def param(name: str) -> Type:
    return Type(PARAM, name)


def format_type(t: Type) -> str:
    """cel-go's FormatCELType: ``list(int)``, ``map(string, dyn)``, ``optional_type(int)``."""
    if t.kind == "null_type":
        return "null"
    if t.kind == "error":
        return "!error!"
    if t.kind == TYPE and not t.params:
        return "type"
    if not t.params:
        return t.name
    return f"{t.name}({', '.join(format_type(p) for p in t.params)})"


_RUNTIME_NAMES = {
    "any": "google.protobuf.Any",
    "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
}


def type_string(t: Type) -> str:
    """cel-go's ``Type.String()`` (common/types/types.go), which compile.go prints in "must evaluate
    to bool ... not <type>": unlike the checker's FormatCELType it shows runtime type names, so
    ``any`` is ``google.protobuf.Any`` and ``null`` is ``null_type``."""
    name = _RUNTIME_NAMES.get(t.kind, t.name)
    if not t.params:
        return name
    return f"{name}({', '.join(type_string(p) for p in t.params)})"


def is_dyn(t: Type) -> bool:
    return t.kind in ("dyn", "any")


def is_dyn_or_error(t: Type) -> bool:
    return t.kind in ("dyn", "any", "error")


def is_optional(t: Type) -> bool:
    return t.kind == OPAQUE and t.name == "optional_type"


# --- parsing the type names used by overload declarations ------------------------------------------

_TYPE_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*|[(),])")


@cache
def parse_type(text: str) -> Type:
    """``int``, ``list(dyn)``, ``map(string,dyn)``, ``optional_type(A)``, ``Quantity``, ``A``...

    Cached: the declarations spell some 1,600 types with a few hundred names, parsed when the
    first expression is checked (a small ``draguard validate`` spent a tenth of its time here);
    types are immutable, so one object per name serves every declaration."""
    tokens = _TYPE_TOKEN.findall(text)
    pos = 0

    def one() -> Type:
        nonlocal pos
        name = tokens[pos]
        pos += 1
        args: list[Type] = []
        if pos < len(tokens) and tokens[pos] == "(":
            pos += 1
            while tokens[pos] != ")":
                args.append(one())
                if tokens[pos] == ",":
                    pos += 1
            pos += 1
        return _named(name, args)

    result = one()
    if pos != len(tokens):
        raise ValueError(f"bad type name {text!r}")
    return result


_SIMPLE = {k: _simple(k) for k in (*PRIMITIVES, "dyn", "any", "timestamp", "duration")}


def _named(name: str, args: list[Type]) -> Type:
    if name in _SIMPLE:
        return _SIMPLE[name]
    if name in ("null_type", "null"):
        return NULL
    if name == "list":
        return list_of(args[0] if args else DYN)
    if name == "map":
        return map_of(args[0], args[1]) if args else map_of(DYN, DYN)
    if name in ("optional_type", "optional"):
        return optional_of(args[0] if args else DYN)
    if name == "type":
        return type_of(args[0]) if args else Type(TYPE, "type")
    if name in OBJECTS:
        return OBJECTS[name]
    if "." in name:
        return Type(OBJECT, name)
    return param(name)


# --- unification ---------------------------------------------------------------------------------


class Mapping:
    """Type parameter substitutions (cel-go's checker mapping), copied on each trial."""

    def __init__(self, subs: dict[str, Type] | None = None) -> None:
        self.subs: dict[str, Type] = dict(subs or {})

    def copy(self) -> Mapping:
        return Mapping(self.subs)

    def find(self, t: Type) -> Type | None:
        return self.subs.get(t.name) if t.kind == PARAM else None


def substitute(m: Mapping, t: Type, params_to_dyn: bool) -> Type:
    found = m.find(t)
    if found is not None:
        return substitute(m, found, params_to_dyn)
    if t.kind == PARAM:
        return DYN if params_to_dyn else t
    if t.params:
        return Type(t.kind, t.name, tuple(substitute(m, p, params_to_dyn) for p in t.params))
    return t


def is_equal_or_less_specific(t1: Type, t2: Type) -> bool:
    if is_dyn(t1) or t1.kind == PARAM:
        return True
    if is_dyn(t2) or t2.kind == PARAM:
        return False
    if t1.kind != t2.kind:
        return False
    if t1.kind in (OPAQUE, LIST, MAP):
        return (
            t1.name == t2.name
            and len(t1.params) == len(t2.params)
            and all(is_equal_or_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    if t1.kind == TYPE:
        return True
    return t1 == t2


def most_general(t1: Type, t2: Type) -> Type:
    return t1 if is_equal_or_less_specific(t1, t2) else t2


def _not_referenced_in(m: Mapping, t: Type, within: Type) -> bool:
    if t == within:
        return False
    if within.kind == PARAM:
        sub = m.find(within)
        return True if sub is None else _not_referenced_in(m, t, sub)
    return all(_not_referenced_in(m, t, p) for p in within.params)


def _valid_substitution(m: Mapping, t1: Type, t2: Type) -> tuple[bool, bool]:
    """Is t2 (a type parameter) a valid substitution for t1, and does it already have one."""
    if t1 == t2:
        return True, True
    sub = m.find(t2)
    if sub is not None:
        if t1 == sub:
            return True, True
        if _assignable(m, t1, sub):
            new = most_general(t1, sub)
            if _not_referenced_in(m, t2, new):
                m.subs[t2.name] = new
            return True, True
        return False, True
    if _not_referenced_in(m, t2, t1):
        m.subs[t2.name] = t1
        return True, False
    return False, False


def _nullable(t: Type) -> bool:
    return t.kind in (OPAQUE, OBJECT, "any", "timestamp", "duration", "null_type")


def _assignable(m: Mapping, t1: Type, t2: Type) -> bool:
    """Is a value of type t1 assignable where t2 is expected (cel-go internalIsAssignable)."""
    if t2.kind == PARAM:
        valid, has_sub = _valid_substitution(m, t1, t2)
        if valid:
            return True
        if has_sub:
            return False
    if t1.kind == PARAM:
        return _valid_substitution(m, t2, t1)[0]
    if is_dyn_or_error(t1) or is_dyn_or_error(t2):
        return True
    if t1.kind == "null_type":
        return _nullable(t2)
    if t2.kind == "null_type":
        return _nullable(t1)
    if t1.kind == TYPE:
        return t2.kind == TYPE
    if t1.kind in (OPAQUE, LIST, MAP):
        return (
            t1.kind == t2.kind
            and t1.name == t2.name
            and len(t1.params) == len(t2.params)
            and all(_assignable(m, a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    return t1 == t2


def is_assignable(m: Mapping, t1: Type, t2: Type) -> Mapping | None:
    """The updated mapping if t1 is assignable to t2, else None (m is left untouched)."""
    trial = m.copy()
    return trial if _assignable(trial, t1, t2) else None


def is_assignable_list(m: Mapping, l1: list[Type], l2: list[Type]) -> Mapping | None:
    if len(l1) != len(l2):
        return None
    trial = m.copy()
    return trial if all(_assignable(trial, a, b) for a, b in zip(l1, l2, strict=True)) else None


def type_params(t: Type) -> set[str]:
    if t.kind == PARAM:
        return {t.name}
    out: set[str] = set()
    for p in t.params:
        out |= type_params(p)
    return out


def may_hold_object(t: Type) -> bool:
    """Could a value of static type t be (or contain) a Kubernetes object or optional at runtime?

    Equality on such values needs the library's semantics (Semver == string is an error, Quantity
    equality is by value), so the engines must not compare them natively.
    """
    if t.kind in ("dyn", "any", "error", PARAM, OBJECT, OPAQUE):
        return True
    return any(may_hold_object(p) for p in t.params)
