"""Pure-Python implementations of the DRA CEL environment's library functions.

Neither engine draguard runs (the Rust ``cel`` package, ``celpy``) ships the Kubernetes libraries or
all of cel-go's extensions, so this package provides them once, as a declarative registry both
engines and the type checker read: ``OVERLOADS`` lists every overload with its CEL signature, its
implementation over plain Python values and its cost rule. Value conventions are in ``values``;
``cel_equals``/``cel_contains``/``cel_compare`` give cel-go's equality and ordering.

Sources (Kubernetes 1.36, cel-go as vendored there): ``k8s.io/apiserver/pkg/cel/library``
(quantity, semver v1, lists, regex, urls, ip, cidr, format, cost), cel-go ``ext`` (strings v2,
sets, lists v3) and the optional library's ``first``/``last``, and
``k8s.io/dynamic-resource-allocation/cel/compile.go`` (``includes``). Macros (``cel.bind``,
``sortBy``, two-variable comprehensions, ``optMap``) belong to the engine.
"""

from __future__ import annotations

from policies.cel.library import (
    dra,
    extlists,
    formats,
    formatting,
    kubelists,
    netaddr,
    quantity,
    regex,
    semver,
    sets,
    strings,
    urls,
)
from policies.cel.library.cost import CallSite, CostRule
from policies.cel.library.equality import cel_compare, cel_contains, cel_equals, cel_type_name, value_equal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.formatting import StaticArg, format_static_error
from policies.cel.library.overload import Overload
from policies.cel.library.regex import RegexError, compile_regex, matches
from policies.cel.library.semver import parse_semver
from policies.cel.library.values import CIDR, IP, URL, DerivedQuantity, NamedFormat, Optional, Semver, UInt

OVERLOADS: tuple[Overload, ...] = (
    *quantity.OVERLOADS,
    *semver.OVERLOADS,
    *kubelists.OVERLOADS,
    *regex.OVERLOADS,
    *strings.OVERLOADS,
    *formatting.OVERLOADS,
    *sets.OVERLOADS,
    *extlists.OVERLOADS,
    *urls.OVERLOADS,
    *netaddr.OVERLOADS,
    *formats.OVERLOADS,
    *dra.OVERLOADS,
)

__all__ = [
    "CIDR",
    "IP",
    "OVERLOADS",
    "URL",
    "CELEvalError",
    "CallSite",
    "CostRule",
    "DerivedQuantity",
    "NamedFormat",
    "Optional",
    "Overload",
    "RegexError",
    "Semver",
    "StaticArg",
    "UInt",
    "cel_compare",
    "cel_contains",
    "cel_equals",
    "cel_type_name",
    "compile_regex",
    "format_static_error",
    "matches",
    "parse_semver",
    "value_equal",
]
