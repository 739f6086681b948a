"""What the DRA CEL environment declares: the ``device`` variable, cel-go's standard functions,
the optional-types library, and every library overload of ``policies.cel.library``.

The standard overloads and their ids are cel-go's (``common/stdlib``, ``cel/library.go`` for
optionals), with CrossTypeNumericComparisons enabled as the Kubernetes base environment does
(``apiserver/pkg/cel/environment/base.go``). The device type is upstream's ``kubernetes.DRADevice``
(``dynamic-resource-allocation/cel/compile.go``): attributes are typed ``any`` unless
DRAListTypeAttributes is on (then ``dyn``), and ``allowMultipleAllocations`` is declared only when
the environment includes DRAConsumableCapacity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from policies.cel import types as t
from policies.cel.environment import Environment
from policies.cel.library import OVERLOADS as LIBRARY_OVERLOADS
from policies.cel.library import CostRule
from policies.cel.types import Type, parse_type

# Size bounds of the device variable (resource/v1 types.go), used by the cost estimator.
MAX_ATTRIBUTES = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
MAX_DOMAIN_LENGTH = 63  # DeviceMaxDomainLength
MAX_ID_LENGTH = 32  # DeviceMaxIDLength
MAX_DRIVER_LENGTH = 63  # DriverNameMaxLength
MAX_ATTRIBUTE_LENGTH = 64  # DeviceAttributeMaxValueLength
MAX_ATTRIBUTE_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice


@dataclass(frozen=True)
class OverloadDecl:
    """One overload as the checker sees it; ``impl``/``cost`` come from the library registry
    (None for cel-go's built-ins, which the engines implement natively or draguard supplies)."""

    id: str
    member: bool
    params: tuple[Type, ...]
    result: Type
    impl: Callable[..., Any] | None = None
    cost: CostRule | None = None

    @property
    def type_params(self) -> set[str]:
        out: set[str] = set()
        for p in (*self.params, self.result):
            out |= t.type_params(p)
        return out

    def __reduce__(self) -> tuple[Callable[[str], OverloadDecl], tuple[str]]:
        # Pickled as a reference to the registry, whose entries are the only overloads there are
        # (many carry closures): the webhook's CEL worker process sends checked expressions back.
        return (overload, (self.id,))


@dataclass
class FunctionDecl:
    name: str
    overloads: list[OverloadDecl] = field(default_factory=list)


def _std() -> list[tuple[str, OverloadDecl]]:
    """cel-go's standard library declarations (name, overload)."""
    out: list[tuple[str, OverloadDecl]] = []

    def add(name: str, oid: str, params: str, result: str, member: bool = False) -> None:
        types_ = tuple(parse_type(p) for p in params.split(";")) if params else ()
        out.append((name, OverloadDecl(oid, member, types_, parse_type(result))))

    add("_?_:_", "conditional", "bool;A;A", "A")
    add("_&&_", "logical_and", "bool;bool", "bool")
    add("_||_", "logical_or", "bool;bool", "bool")
    add("!_", "logical_not", "bool", "bool")
    add("@not_strictly_false", "not_strictly_false", "bool", "bool")
    add("_==_", "equals", "A;A", "bool")
    add("_!=_", "not_equals", "A;A", "bool")
    numeric = {"int": "int64", "uint": "uint64", "double": "double"}
    for op, oid in (("_<_", "less"), ("_<=_", "less_equals"), ("_>_", "greater"), ("_>=_", "greater_equals")):
        for name in ("bool", "string", "bytes", "timestamp", "duration"):
            add(op, f"{oid}_{name}", f"{name};{name}", "bool")
        for a, an in numeric.items():
            for b, bn in numeric.items():
                suffix = an if a == b else f"{an}_{bn}"
                add(op, f"{oid}_{suffix}", f"{a};{b}", "bool")
    for name, oid in (("int", "int64"), ("uint", "uint64"), ("double", "double")):
        add("_+_", f"add_{oid}", f"{name};{name}", name)
        add("_-_", f"subtract_{oid}", f"{name};{name}", name)
        add("_*_", f"multiply_{oid}", f"{name};{name}", name)
        add("_/_", f"divide_{oid}", f"{name};{name}", name)
    add("_%_", "modulo_int64", "int;int", "int")
    add("_%_", "modulo_uint64", "uint;uint", "uint")
    add("_+_", "add_string", "string;string", "string")
    add("_+_", "add_bytes", "bytes;bytes", "bytes")
    add("_+_", "add_list", "list(A);list(A)", "list(A)")
    add("_+_", "add_timestamp_duration", "timestamp;duration", "timestamp")
    add("_+_", "add_duration_timestamp", "duration;timestamp", "timestamp")
    add("_+_", "add_duration_duration", "duration;duration", "duration")
    add("_-_", "subtract_timestamp_timestamp", "timestamp;timestamp", "duration")
    add("_-_", "subtract_timestamp_duration", "timestamp;duration", "timestamp")
    add("_-_", "subtract_duration_duration", "duration;duration", "duration")
    add("-_", "negate_int64", "int", "int")
    add("-_", "negate_double", "double", "double")
    add("_[_]", "index_list", "list(A);int", "A")
    add("_[_]", "index_map", "map(K,V);K", "V")
    add("@in", "in_list", "A;list(A)", "bool")
    add("@in", "in_map", "A;map(A,B)", "bool")
    for name in ("string", "bytes"):
        add("size", f"size_{name}", name, "int")
        add("size", f"{name}_size", name, "int", member=True)
    add("size", "size_list", "list(A)", "int")
    add("size", "list_size", "list(A)", "int", member=True)
    add("size", "size_map", "map(A,B)", "int")
    add("size", "map_size", "map(A,B)", "int", member=True)
    add("contains", "contains_string", "string;string", "bool", member=True)
    add("startsWith", "starts_with_string", "string;string", "bool", member=True)
    add("endsWith", "ends_with_string", "string;string", "bool", member=True)
    add("matches", "matches", "string;string", "bool")
    add("matches", "matches_string", "string;string", "bool", member=True)
    conversions = {
        "int": ("int", "uint", "double", "string", "timestamp"),
        "uint": ("uint", "int", "double", "string"),
        "double": ("double", "int", "uint", "string"),
        "string": ("string", "int", "uint", "double", "bool", "bytes", "timestamp", "duration"),
        "bytes": ("bytes", "string"),
        "bool": ("bool", "string"),
        "timestamp": ("timestamp", "string", "int"),
        "duration": ("duration", "string"),
    }
    names = {"int": "int64", "uint": "uint64"}
    for target, sources in conversions.items():
        for source in sources:
            add(target, f"{names.get(source, source)}_to_{names.get(target, target)}", source, target)
    add("dyn", "to_dyn", "A", "dyn")
    add("type", "type", "A", "type(A)")
    for getter in ("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek"):
        add(getter, f"timestamp_to_{getter}", "timestamp", "int", member=True)
        add(getter, f"timestamp_to_{getter}_with_tz", "timestamp;string", "int", member=True)
    for getter in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
        add(getter, f"timestamp_to_{getter}", "timestamp", "int", member=True)
        add(getter, f"timestamp_to_{getter}_with_tz", "timestamp;string", "int", member=True)
        add(getter, f"duration_to_{getter}", "duration", "int", member=True)
    # Optional types (cel.OptionalTypes): the functions and the optional index/select forms.
    add("optional.of", "optional_of", "V", "optional_type(V)")
    add("optional.ofNonZeroValue", "optional_ofNonZeroValue", "V", "optional_type(V)")
    add("optional.none", "optional_none", "", "optional_type(T)")
    add("value", "optional_value", "optional_type(V)", "V", member=True)
    add("hasValue", "optional_hasValue", "optional_type(V)", "bool", member=True)
    add("or", "optional_or_optional", "optional_type(V);optional_type(V)", "optional_type(V)", member=True)
    add("orValue", "optional_orValue_value", "optional_type(V);V", "V", member=True)
    add("_[?_]", "list_optindex_optional_int", "list(V);int", "optional_type(V)")
    add("_[?_]", "map_optindex_optional_value", "map(K,V);K", "optional_type(V)")
    add("_[_]", "optional_list_index_int", "optional_type(list(V));int", "optional_type(V)")
    add("_[_]", "optional_map_index_value", "optional_type(map(K,V));K", "optional_type(V)")
    # Internal functions of macro expansions (cel-go ext: two-variable comprehensions).
    add("cel.@mapInsert", "@mapInsert_map_key_value", "map(K,V);K;V", "map(K,V)")
    add("cel.@mapInsert", "@mapInsert_map_map", "map(K,V);map(K,V)", "map(K,V)")
    return out


# Identifiers that name types (`type(x) == int`).
TYPE_IDENTS = {
    name: t.type_of(parse_type(name))
    for name in ("int", "uint", "double", "bool", "string", "bytes", "null_type", "list", "map", "dyn")
}
TYPE_IDENTS["type"] = t.type_of(t.Type(t.TYPE, "type"))


@cache
def functions(declares_includes: bool) -> dict[str, FunctionDecl]:
    """All functions, standard first then the library's, by name."""
    table: dict[str, FunctionDecl] = {}
    for name, overload in _std():
        table.setdefault(name, FunctionDecl(name)).overloads.append(overload)
    for o in LIBRARY_OVERLOADS:
        if o.function == "includes" and not declares_includes:
            continue
        decl = OverloadDecl(
            o.overload_id,
            o.member,
            tuple(parse_type(p) for p in o.params),
            parse_type(o.result),
            o.impl,
            o.cost,
        )
        table.setdefault(o.function, FunctionDecl(o.function)).overloads.append(decl)
    return table


def overload(overload_id: str) -> OverloadDecl:
    """The registry's overload of that id (ids are unique across every function)."""
    return _overloads_by_id()[overload_id]


@cache
def _overloads_by_id() -> dict[str, OverloadDecl]:
    return {o.id: o for decl in functions(declares_includes=True).values() for o in decl.overloads}


def attribute_type(env: Environment) -> Type:
    """``any`` (gate off) or ``dyn`` (DRAListTypeAttributes on, so that exists/all/in work)."""
    return t.DYN if env.list_type_attributes else t.ANY


def device_fields(env: Environment) -> dict[str, Type]:
    """The fields of ``kubernetes.DRADevice`` in this environment."""
    fields = {
        "driver": t.STRING,
        "attributes": t.map_of(t.STRING, t.map_of(t.STRING, attribute_type(env))),
        "capacity": t.map_of(t.STRING, t.map_of(t.STRING, t.QUANTITY)),
    }
    if env.declares_allow_multiple_allocations:
        fields["allowMultipleAllocations"] = t.BOOL
    return fields


def attribute_max_size(env: Environment) -> int:
    """MaxElements of the attribute type: a string length or, with list attributes, a list length."""
    return (
        max(MAX_ATTRIBUTE_LENGTH, MAX_ATTRIBUTE_VALUES) if env.list_type_attributes else MAX_ATTRIBUTE_LENGTH
    )
