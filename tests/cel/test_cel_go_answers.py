"""Extension-library answers exactly as cel-go gives them inside the Kubernetes 1.36.2 API server.


Every expected value and error text below was read from a real kube-apiserver v1.36.2 (cel-go
v0.26.0, built with Go 1.26.4): each expression was evaluated in a ValidatingAdmissionPolicy and its
result (or runtime error) taken from the warning it produced. The behaviours come from
``google/cel-go`` ``ext/strings.go`` (strings library version 2, as
``k8s.io/apiserver/pkg/cel/environment/base.go`` enables it), ``ext/formatting.go`` (the
locale-aware ``format`` of version 1, printing through golang.org/x/text), ``common/decls/decls.go``
(runtime type guards: ``no such overload: fn(types)``), ``k8s.io/apiserver/pkg/cel/library/urls.go``
over Go's ``net/url`` (``url.ParseRequestURI`` then ``url.Parse``) and
``k8s.io/dynamic-resource-allocation/cel/compile.go`` (the non-bool result error). Both engines must
give the same answers.
"""

# ruff: noqa: RUF001 - the Greek alpha, © and emoji in the samples are deliberate multi-byte code points

from __future__ import annotations

import json
from typing import Any

import pytest
from controlplane import ControlPlane, call, wait_for  # tests/kube, on the path from tests/conftest.py

from policies.api.resource import Device
from policies.cel import Environment, EvalError, bind_device, compile_expression

ENGINES = ("rust", "celpy")
_DEVICE = bind_device("d", Device.model_validate({"name": "x"}))


class Err(str):
    """An expected runtime error, by its exact text."""


class Bad(str):
    """The reason ``url()`` gives for a URL it refuses (Go's url.Error after ``parse "<url>": ``)."""


def _evaluate(expression: str, engine: str) -> Any:
    """The value of ``expression`` (any type: DRAListTypeAttributes lets a selector be dyn)."""
    env = Environment(engine=engine, list_type_attributes=True)  # type: ignore[arg-type]
    try:
        return compile_expression(f"dyn({expression})", env).evaluate(_DEVICE)
    except EvalError as exc:
        return Err(exc.message)


def _same(got: Any, want: Any) -> bool:
    """Equal, and of the same Python type (an int is not a bool, an error is not a string)."""
    return type(got) is type(want) and got == want


# ext/strings.go, version 2: indexes count code points; charAt/substring accept the end of the
# string; indexOf/lastIndexOf with a start at or past the end (an empty string included) answer -1,
# a negative start is an error; an empty search string answers the start itself, unchecked;
# split/replace work on code points with an empty separator; lowerAscii/upperAscii leave non-ASCII.
STRINGS: list[tuple[str, Any]] = [
    ('"".charAt(-1)', Err("index out of range: -1")),
    ('"".substring(-1)', Err("index out of range: -1")),
    ('"".charAt(0)', ""),
    ('"".substring(0)', ""),
    ('"".charAt(1)', Err("index out of range: 1")),
    ('"".substring(1)', Err("index out of range: 1")),
    ('"".charAt(3)', Err("index out of range: 3")),
    ('"".substring(3)', Err("index out of range: 3")),
    ('"".substring(-1, 1)', Err("index out of range: -1")),
    ('"".substring(0, -1)', Err("invalid substring range. start: 0, end: -1")),
    ('"".substring(0, 0)', ""),
    ('"".substring(0, 7)', Err("index out of range: 7")),
    ('"".substring(1, 0)', Err("invalid substring range. start: 1, end: 0")),
    ('"".substring(1, 3)', Err("index out of range: 1")),
    ('"".substring(3, 3)', Err("index out of range: 3")),
    ('"".indexOf("")', 0),
    ('"".lastIndexOf("")', 0),
    ('"".indexOf("", -1)', -1),
    ('"".lastIndexOf("", -1)', -1),
    ('"".indexOf("", 1)', 1),
    ('"".lastIndexOf("", 1)', 1),
    ('"".indexOf("", 5)', 5),
    ('"".lastIndexOf("", 5)', 5),
    ('"".indexOf("a")', -1),
    ('"".lastIndexOf("a")', -1),
    ('"".indexOf("a", -1)', Err("index out of range: -1")),
    ('"".lastIndexOf("a", -1)', Err("index out of range: -1")),
    ('"".indexOf("a", 1)', -1),
    ('"".lastIndexOf("a", 1)', -1),
    ('"".indexOf("a", 5)', -1),
    ('"".lastIndexOf("a", 5)', -1),
    ('"".indexOf("😀")', -1),
    ('"".lastIndexOf("😀")', -1),
    ('"".indexOf("😀", -1)', Err("index out of range: -1")),
    ('"".lastIndexOf("😀", -1)', Err("index out of range: -1")),
    ('"".indexOf("😀", 1)', -1),
    ('"".lastIndexOf("😀", 1)', -1),
    ('"".indexOf("😀", 5)', -1),
    ('"".lastIndexOf("😀", 5)', -1),
    ('"".lowerAscii()', ""),
    ('"".upperAscii()', ""),
    ('"".trim()', ""),
    ('"".split("")', []),
    ('"".split("", -1)', []),
    ('"".split("", 0)', []),
    ('"".split("", 1)', []),
    ('"".split("", 2)', []),
    ('"".replace("", "")', ""),
    ('"".replace("", "", -2)', ""),
    ('"".replace("", "", 1)', ""),
    ('"".replace("", "_")', "_"),
    ('"".replace("", "_", -2)', "_"),
    ('"".replace("", "_", 1)', "_"),
    ('"".split("a")', [""]),
    ('"".split("a", -1)', [""]),
    ('"".split("a", 0)', []),
    ('"".split("a", 1)', [""]),
    ('"".split("a", 2)', [""]),
    ('"".split("😀")', [""]),
    ('"".split("😀", -1)', [""]),
    ('"".split("😀", 0)', []),
    ('"".split("😀", 1)', [""]),
    ('"".split("😀", 2)', [""]),
    ('"".replace("😀", "")', ""),
    ('"".replace("😀", "", -2)', ""),
    ('"".replace("😀", "", 1)', ""),
    ('"".replace("😀", "_")', ""),
    ('"".replace("😀", "_", -2)', ""),
    ('"".replace("😀", "_", 1)', ""),
    ('"a".indexOf("")', 0),
    ('"a".lastIndexOf("")', 1),
    ('"a".indexOf("", -1)', -1),
    ('"a".lastIndexOf("", -1)', -1),
    ('"a".indexOf("", 1)', 1),
    ('"a".lastIndexOf("", 1)', 1),
    ('"a".indexOf("", 5)', 5),
    ('"a".lastIndexOf("", 5)', 5),
    ('"a".indexOf("a")', 0),
    ('"a".lastIndexOf("a")', 0),
    ('"a".indexOf("a", -1)', Err("index out of range: -1")),
    ('"a".lastIndexOf("a", -1)', Err("index out of range: -1")),
    ('"a".indexOf("a", 1)', -1),
    ('"a".lastIndexOf("a", 1)', -1),
    ('"a".indexOf("a", 5)', -1),
    ('"a".lastIndexOf("a", 5)', -1),
    ('"a".indexOf("😀")', -1),
    ('"a".lastIndexOf("😀")', -1),
    ('"a".indexOf("😀", -1)', Err("index out of range: -1")),
    ('"a".lastIndexOf("😀", -1)', Err("index out of range: -1")),
    ('"a".indexOf("😀", 1)', -1),
    ('"a".lastIndexOf("😀", 1)', -1),
    ('"a".indexOf("😀", 5)', -1),
    ('"a".lastIndexOf("😀", 5)', -1),
    ('"a".lowerAscii()', "a"),
    ('"a".upperAscii()', "A"),
    ('"a".trim()', "a"),
    ('"ta©o©αT".lowerAscii()', "ta©o©αt"),
    ('"ta©o©αT".upperAscii()', "TA©O©αT"),
    ('"ta©o©αT".trim()', "ta©o©αT"),
    ('"😀x😀".charAt(-1)', Err("index out of range: -1")),
    ('"😀x😀".substring(-1)', Err("index out of range: -1")),
    ('"😀x😀".charAt(0)', "😀"),
    ('"😀x😀".substring(0)', "😀x😀"),
    ('"😀x😀".charAt(1)', "x"),
    ('"😀x😀".substring(1)', "x😀"),
    ('"😀x😀".charAt(3)', ""),
    ('"😀x😀".substring(3)', ""),
    ('"😀x😀".substring(-1, 1)', Err("index out of range: -1")),
    ('"😀x😀".substring(0, -1)', Err("invalid substring range. start: 0, end: -1")),
    ('"😀x😀".substring(0, 0)', ""),
    ('"😀x😀".substring(0, 7)', Err("index out of range: 7")),
    ('"😀x😀".substring(1, 0)', Err("invalid substring range. start: 1, end: 0")),
    ('"😀x😀".substring(1, 3)', "x😀"),
    ('"😀x😀".substring(3, 3)', ""),
    ('"😀x😀".indexOf("")', 0),
    ('"😀x😀".lastIndexOf("")', 3),
    ('"😀x😀".indexOf("", -1)', -1),
    ('"😀x😀".lastIndexOf("", -1)', -1),
    ('"😀x😀".indexOf("", 1)', 1),
    ('"😀x😀".lastIndexOf("", 1)', 1),
    ('"😀x😀".indexOf("", 5)', 5),
    ('"😀x😀".lastIndexOf("", 5)', 5),
    ('"😀x😀".indexOf("a")', -1),
    ('"😀x😀".lastIndexOf("a")', -1),
    ('"😀x😀".indexOf("a", -1)', Err("index out of range: -1")),
    ('"😀x😀".lastIndexOf("a", -1)', Err("index out of range: -1")),
    ('"😀x😀".indexOf("a", 1)', -1),
    ('"😀x😀".lastIndexOf("a", 1)', -1),
    ('"😀x😀".indexOf("a", 5)', -1),
    ('"😀x😀".lastIndexOf("a", 5)', -1),
    ('"😀x😀".indexOf("😀")', 0),
    ('"😀x😀".lastIndexOf("😀")', 2),
    ('"😀x😀".indexOf("😀", -1)', Err("index out of range: -1")),
    ('"😀x😀".lastIndexOf("😀", -1)', Err("index out of range: -1")),
    ('"😀x😀".indexOf("😀", 1)', 2),
    ('"😀x😀".lastIndexOf("😀", 1)', 0),
    ('"😀x😀".indexOf("😀", 5)', -1),
    ('"😀x😀".lastIndexOf("😀", 5)', -1),
    ('"😀x😀".split("")', ["😀", "x", "😀"]),
    ('"😀x😀".split("", -1)', ["😀", "x", "😀"]),
    ('"😀x😀".split("", 0)', []),
    ('"😀x😀".split("", 1)', ["😀x😀"]),
    ('"😀x😀".split("", 2)', ["😀", "x😀"]),
    ('"😀x😀".replace("", "")', "😀x😀"),
    ('"😀x😀".replace("", "", -2)', "😀x😀"),
    ('"😀x😀".replace("", "", 1)', "😀x😀"),
    ('"😀x😀".replace("", "_")', "_😀_x_😀_"),
    ('"😀x😀".replace("", "_", -2)', "_😀_x_😀_"),
    ('"😀x😀".replace("", "_", 1)', "_😀x😀"),
    ('"😀x😀".split("a")', ["😀x😀"]),
    ('"😀x😀".split("a", -1)', ["😀x😀"]),
    ('"😀x😀".split("a", 0)', []),
    ('"😀x😀".split("a", 1)', ["😀x😀"]),
    ('"😀x😀".split("a", 2)', ["😀x😀"]),
    ('"😀x😀".split("😀")', ["", "x", ""]),
    ('"😀x😀".split("😀", -1)', ["", "x", ""]),
    ('"😀x😀".split("😀", 0)', []),
    ('"😀x😀".split("😀", 1)', ["😀x😀"]),
    ('"😀x😀".split("😀", 2)', ["", "x😀"]),
    ('"😀x😀".replace("😀", "")', "x"),
    ('"😀x😀".replace("😀", "", -2)', "x"),
    ('"😀x😀".replace("😀", "", 1)', "x😀"),
    ('"😀x😀".replace("😀", "_")', "_x_"),
    ('"😀x😀".replace("😀", "_", -2)', "_x_"),
    ('"😀x😀".replace("😀", "_", 1)', "_x😀"),
    ('strings.quote("")', '""'),
    ('strings.quote("a")', '"a"'),
    ('strings.quote("é")', '"é"'),
    ('strings.quote("ta©o©αT")', '"ta©o©αT"'),
    ('strings.quote("hello")', '"hello"'),
    ('strings.quote("😀x😀")', '"😀x😀"'),
    ('strings.quote(" \\t x \\n ")', '" \\t x \\n "'),
    ("[].join()", ""),
    ('[].join("")', ""),
    ('[].join(",")', ""),
    ('[].join("é")', ""),
    ('[""].join()', ""),
    ('[""].join("")', ""),
    ('[""].join(",")', ""),
    ('[""].join("é")', ""),
    ('["a"].join()', "a"),
    ('["a"].join("")', "a"),
    ('["a"].join(",")', "a"),
    ('["a"].join("é")', "a"),
    ('["a", ""].join()', "a"),
    ('["a", ""].join("")', "a"),
    ('["a", ""].join(",")', "a,"),
    ('["a", ""].join("é")', "aé"),
]

# ext/formatting.go: %f/%e go through x/text's number printer, which takes the sign from x < 0,
# so negative zero prints unsigned there (string(), %s and doubles inside lists keep -0); %e puts
# no spaces around the multiplication sign; precision is ignored by %e (passed as a width).
FORMAT: list[tuple[str, Any]] = [
    ('"[%f]".format([-0.0])', "[0.000000]"),
    ('"[%.0f]".format([-0.0])', "[0]"),
    ('"[%.2f]".format([-0.0])', "[0.00]"),
    ('"[%e]".format([-0.0])', "[0.000000×10⁰⁰]"),
    ('"[%.2e]".format([-0.0])', "[0.000000×10⁰⁰]"),
    ('"[%s]".format([-0.0])', "[-0]"),
    ('"[%f]".format([-0.0000001])', "[-0.000000]"),
    ('"[%.0f]".format([-0.0000004])', "[-0]"),
    ('"[%e]".format([-0.0000001])', "[-1.000000×10⁻⁰⁷]"),
    ('"[%f]".format([0.0])', "[0.000000]"),
    ('"[%e]".format([0.0])', "[0.000000×10⁰⁰]"),
    ('"[%e]".format([2.71828])', "[2.718280×10⁰⁰]"),
    ('"[%e]".format([1234567.891])', "[1.234568×10⁰⁶]"),
    ('"[%.12e]".format([-1e100])', "[-1.000000×10¹⁰⁰]"),
    ('"[%e]".format([1e-7])', "[1.000000×10⁻⁰⁷]"),
    ('"[%f]".format([1234567.891])', "[1,234,567.891000]"),
    ('"[%.1f]".format([-1234567.891])', "[-1,234,567.9]"),
    ('"[%e]".format([5e-324])', "[4.940656×10⁻³²⁴]"),
    ('"[%.2f]".format([1.0/0.0])', "[∞]"),
    ('"[%e]".format([-1.0/0.0])', "[    -∞]"),
    ('"[%f]".format(["NaN"])', "[NaN]"),
    ('"[%s]".format([1e21])', "[1e+21]"),
    ("string(-0.0)", "-0"),
    ('"%s".format([[-0.0]])', "[-0.000000]"),
    ('"%s".format([{"a": -0.0}])', '{"a":-0.000000}'),
    (
        '"%d".format([dyn(-0.0)])',
        Err("error during formatting: decimal clause can only be used on integers, was given double"),
    ),
    ("string(0.0)", "0"),
    ('"%s".format([[0.0]])', "[0.000000]"),
    ('"%s".format([{"a": 0.0}])', '{"a":0.000000}'),
    (
        '"%d".format([dyn(0.0)])',
        Err("error during formatting: decimal clause can only be used on integers, was given double"),
    ),
    ("string(1.5)", "1.5"),
    ('"%s".format([[1.5]])', "[1.500000]"),
    ('"%s".format([{"a": 1.5}])', '{"a":1.500000}'),
    (
        '"%d".format([dyn(1.5)])',
        Err("error during formatting: decimal clause can only be used on integers, was given double"),
    ),
    ("string(-0.0 == 0.0)", "true"),
    ("string(1.0 / -0.0)", "-Inf"),
    ("string(-(0.0))", "-0"),
    ("string(0.0 * -1.0)", "-0"),
    ("string(int(-0.0))", "0"),
    ('string(double("-0"))', "-0"),
    ('string(double("-0.0"))', "-0"),
    ("string(-0.0 * 1.0)", "-0"),
    ("string(dyn(-0.0))", "-0"),
    ("string(-0.0 + 0.0)", "0"),
    ("string(-0.0 - 0.0)", "-0"),
    ("string(uint(-0.0))", "0"),
    ("string(-0.0 < 0.0)", "false"),
    ("string([-0.0] == [0.0])", "true"),
    ('"%.3f".format([-0.0001])', "-0.000"),
    ('"%.3f".format([-0.0004])', "-0.000"),
    ('"%.3f".format([-0.0005])', "-0.001"),
    ('"%.3f".format([-0.0006])', "-0.001"),
    ('string(-0.0).size() == 2 ? "two" : "other"', "two"),
]

# common/decls/decls.go: a call whose arguments do not fit the overload at run time is
# 'no such overload: <function>(<argument types>)'; a list is judged by its first element, so a
# mixed list reaches join, which names the bad element the way Go's %v prints it.
GUARDS: list[tuple[str, Any]] = [
    ("dyn(1).charAt(0)", Err("no such overload: charAt(int, int)")),
    ('"a".charAt(dyn("x"))', Err("no such overload: charAt(string, string)")),
    ('dyn(1).indexOf("a")', Err("no such overload: indexOf(int, string)")),
    ('dyn("ab").indexOf(dyn(1))', Err("no such overload: indexOf(string, int)")),
    ("dyn(1).lowerAscii()", Err("no such overload: lowerAscii(int)")),
    ('dyn(1).split(",")', Err("no such overload: split(int, string)")),
    ("dyn(1).substring(0, 1)", Err("no such overload: substring(int, int, int)")),
    ("strings.quote(dyn(1))", Err("no such overload: strings.quote(int)")),
    ('dyn(1).replace("a","b")', Err("no such overload: replace(int, string, string)")),
    ('dyn(1).replace("a","b",1)', Err("no such overload: replace(int, string, string, int)")),
    ("dyn(1).format([])", Err("no such overload: format(int, list)")),
    ('"%s".format(dyn(1))', Err("no such overload: format(string, int)")),
    ('(dyn(["a"]) + dyn([1])).join()', Err("join: invalid input: 1")),
    ('(dyn(["a"]) + dyn([1.5])).join(",")', Err("join: invalid input: 1.5")),
    ('(dyn(["a"]) + dyn([["b"]])).join(",")', Err("join: invalid input: [b]")),
    ('(dyn(["a"]) + dyn([{"b": 1}])).join(",")', Err("join: invalid input: {b: 1}")),
    ('(dyn(["a"]) + dyn([b"x"])).join(",")', Err("join: invalid input: [120]")),
    ('(dyn(["a"]) + dyn([null])).join(",")', Err("join: invalid input: 0")),
    ("dyn([]).join()", ""),
    ("dyn({}).join()", Err("no such overload: join(map)")),
    ("dyn(1).trim()", Err("no such overload: trim(int)")),
    ("dyn(null).upperAscii()", Err("no such overload: upperAscii(null_type)")),
    ('dyn(1.5).lastIndexOf("a", 1)', Err("no such overload: lastIndexOf(double, string, int)")),
    ("dyn(1).getHost()", Err("no such overload: getHost(int)")),
    ("url(dyn(1)).getHost()", Err("no such overload: url(int)")),
    ("isURL(dyn(1))", Err("no such overload: isURL(int)")),
    ('dyn(b"a").charAt(0)', Err("no such overload: charAt(bytes, int)")),
    ("dyn([1]).charAt(0)", Err("no such overload: charAt(list, int)")),
    ('dyn({"a": 1}).charAt(0)', Err("no such overload: charAt(map, int)")),
    ('dyn(duration("1s")).charAt(0)', Err("no such overload: charAt(google.protobuf.Duration, int)")),
    (
        'dyn(timestamp("2020-01-01T00:00:00Z")).charAt(0)',
        Err("no such overload: charAt(google.protobuf.Timestamp, int)"),
    ),
    ("dyn(optional.of(1)).charAt(0)", Err("no such overload: charAt(optional_type, int)")),
    ('dyn(quantity("1")).charAt(0)', Err("no such overload: charAt(kubernetes.Quantity, int)")),
    ('dyn(url("http://a")).charAt(0)', Err("no such overload: charAt(kubernetes.URL, int)")),
    ('dyn(ip("1.2.3.4")).charAt(0)', Err("no such overload: charAt(net.IP, int)")),
    ('dyn(semver("1.0.0")).charAt(0)', Err("no such overload: charAt(kubernetes.Semver, int)")),
    ('dyn(cidr("1.0.0.0/8")).charAt(0)', Err("no such overload: charAt(net.CIDR, int)")),
    ("dyn(format.dns1123Label()).charAt(0)", Err("no such overload: charAt(kubernetes.NamedFormat, int)")),
    ("dyn(true).charAt(0)", Err("no such overload: charAt(bool, int)")),
]

# ext/strings.go joinValSeparator: 'join: invalid input: %v'.
JOIN: list[tuple[str, Any]] = [
    ('(dyn(["a"]) + dyn([[1, 2]])).join()', Err("join: invalid input: [1, 2]")),
    ('(dyn(["a"]) + dyn([["a", "b"]])).join()', Err("join: invalid input: [a, b]")),
    ('(dyn(["a"]) + dyn([[[1], []]])).join()', Err("join: invalid input: [[1], []]")),
    ('(dyn(["a"]) + dyn([{1: "x"}])).join()', Err("join: invalid input: {1: x}")),
    ('(dyn(["a"]) + dyn([1e20])).join()', Err("join: invalid input: 1e+20")),
    ('(dyn(["a"]) + dyn([-0.0])).join()', Err("join: invalid input: -0")),
    ('(dyn(["a"]) + dyn([1e-7])).join()', Err("join: invalid input: 1e-07")),
    ('(dyn(["a"]) + dyn([123456789.0])).join()', Err("join: invalid input: 1.23456789e+08")),
    ('(dyn(["a"]) + dyn([1u])).join()', Err("join: invalid input: 1")),
    ('(dyn(["a"]) + dyn([true])).join()', Err("join: invalid input: true")),
    ('(dyn(["a"]) + dyn([b"\\xff\\x00"])).join()', Err("join: invalid input: [255 0]")),
    ('(dyn(["a"]) + dyn([[null]])).join()', Err("join: invalid input: [0]")),
    ('(dyn(["a"]) + dyn([{"a": [1]}])).join()', Err("join: invalid input: {a: [1]}")),
    ('(dyn(["a"]) + dyn([[b"x"]])).join()', Err("join: invalid input: [[120]]")),
    ('(dyn(["a"]) + dyn(["x".size() == 1 ? 3 : 4])).join()', Err("join: invalid input: 3")),
    ('(dyn(["a"]) + dyn([duration("1h1s")])).join()', Err("join: invalid input: 1h0m1s")),
    (
        '(dyn(["a"]) + dyn([timestamp("2020-01-01T00:00:00Z")])).join()',
        Err("join: invalid input: 2020-01-01 00:00:00 +0000 UTC"),
    ),
    ('(dyn(["a"]) + dyn([quantity("1Gi")])).join()', Err("join: invalid input: 1Gi")),
    ('(dyn(["a"]) + dyn([url("http://a/b")])).join()', Err("join: invalid input: http://a/b")),
    ('(dyn(["a"]) + dyn([ip("1.2.3.4")])).join()', Err("join: invalid input: 1.2.3.4")),
    ('(dyn(["a"]) + dyn([cidr("1.2.3.0/24")])).join()', Err("join: invalid input: 1.2.3.0/24")),
    ('(dyn(["a"]) + dyn([semver("1.2.3")])).join()', Err("join: invalid input: 1.2.3")),
]

# library/urls.go over Go 1.26.4's net/url: (text, isURL(text), then url(text)'s scheme, host,
# hostname, port, escaped path and query, or url()'s error).
URLS: list[tuple[str, bool, Any]] = [
    ("http://::1/", False, Bad('invalid port "::1" after host')),
    ("http://[::1]/", True, ("http", "[::1]", "::1", "", "/", {})),
    ("http://[::1]:80/", True, ("http", "[::1]:80", "::1", "80", "/", {})),
    ("http://[::1]:/", True, ("http", "[::1]:", "::1", "", "/", {})),
    ("http://[::1]x/", False, Bad('invalid port "x" after host')),
    ("http://[::1", False, Bad("missing ']' in host")),
    ("http://[1.2.3.4]/", False, Bad("invalid IP-literal")),
    ("http://[::ffff:1.2.3.4]/", True, ("http", "[::ffff:1.2.3.4]", "::ffff:1.2.3.4", "", "/", {})),
    ("http://[fe80::1%25en0]/", True, ("http", "[fe80::1%en0]", "fe80::1%en0", "", "/", {})),
    ("http://[fe80::1%en0]/", False, Bad('invalid URL escape "%en"')),
    (
        "http://[fe80::1%25]/",
        False,
        Bad('invalid host: ParseAddr("fe80::1%"): zone must be a non-empty string'),
    ),
    ("http://a[::1]/", False, Bad("invalid IP-literal")),
    ("http://[::1][::2]/", False, Bad("invalid IP-literal")),
    ("http://[zz]/", False, Bad('invalid host: ParseAddr("zz"): unable to parse IP')),
    ("http://[]/", False, Bad('invalid host: ParseAddr(""): unable to parse IP')),
    ("http://[%3A%3A1]/", False, Bad('invalid URL escape "%3A"')),
    ("http://localhost:80:80/", False, Bad('invalid port ":80:80" after host')),
    ("http://a:b/", False, Bad('invalid port ":b" after host')),
    ("http://a:/", True, ("http", "a:", "a", "", "/", {})),
    ("http://:80/", True, ("http", ":80", "", "80", "/", {})),
    ("http:///path", True, ("http", "", "", "", "/path", {})),
    ("http://", True, ("http", "", "", "", "", {})),
    ("http:", True, ("http", "", "", "", "", {})),
    ("http:/x", True, ("http", "", "", "", "/x", {})),
    ("https://user:pass@host:8443/p?q=1#f", True, ("https", "host:8443", "host", "8443", "/p", {"q": ["1"]})),
    ("http://u@h@x/", True, ("http", "x", "x", "", "/", {})),
    ("http://us%zzer@h/", False, Bad('invalid URL escape "%zz"')),
    ("http://us er@h/", False, Bad("net/url: invalid userinfo")),
    ("http://h/%zz", False, Bad('invalid URL escape "%zz"')),
    ("http://h/a%2Fb", True, ("http", "h", "h", "", "/a%2Fb", {})),
    ("http://h/é", True, ("http", "h", "h", "", "/%C3%A9", {})),
    ("http://h/%E9", True, ("http", "h", "h", "", "/%E9", {})),
    ("http://h%2e/", False, Bad('invalid URL escape "%2e"')),
    ("http://h%c3%a9/", True, ("http", "hé", "hé", "", "/", {})),
    ("http://h_/", True, ("http", "h_", "h_", "", "/", {})),
    ("http://h<>/", True, ("http", "h<>", "h<>", "", "/", {})),
    ("foo://a:b:c/", False, Bad('invalid port ":c" after host')),
    ("foo://::1/", True, ("foo", "::1", ":", "1", "/", {})),
    ("postgres://h1:5432,h2:5432/db", True, ("postgres", "h1:5432,h2:5432", "h1:5432,h2", "5432", "/db", {})),
    ("mailto:a@b", True, ("mailto", "", "", "", "", {})),
    ("a/b", False, Bad("invalid URI for request")),
    ("/a/b", True, ("", "", "", "", "/a/b", {})),
    ("//host/p", True, ("", "host", "host", "", "/p", {})),
    ("*", True, ("", "", "", "", "*", {})),
    ("", False, Bad("empty url")),
    ("HTTP://A/B", True, ("http", "A", "A", "", "/B", {})),
    ("1http://x", False, Bad("invalid URI for request")),
    ("http://a?x=1&y=2&x=3", True, ("http", "a", "a", "", "", {"x": ["1", "3"], "y": ["2"]})),
    ("http://a?x=%zz&y=1", True, ("http", "a", "a", "", "", {"y": ["1"]})),
    ("http://a?x;y=1&z=2", True, ("http", "a", "a", "", "", {"z": ["2"]})),
    ("http://a?+=+&%20=%2B", True, ("http", "a", "a", "", "", {" ": [" ", "+"]})),
    ("http://a#%zz", False, Bad('invalid character "#" in host name')),
    ("http://[1::2::3]/", False, Bad('invalid host: ParseAddr("1::2::3"): multiple :: in address (at ":3")')),
    ("http://h::/", False, Bad('invalid port "::" after host')),
]

# Equality is by url.URL.String(): "http:/x" has no authority (OmitHost), "http:///x" an empty one.
URL_EQUALITY: list[tuple[str, str, bool]] = [
    ("http:/x", "http:///x", False),
    ("http:/x", "http:/x", True),
    ("http:/", "http:///", False),
    ("file:///a", "file:/a", False),
    ("http://h/%E9", "http://h/%e9", False),
    ("http://h%C3%A9/", "http://hé/", True),
    ("http://h/a%2fb", "http://h/a%2Fb", False),
    ("http://h/a#b%20c", "http://h/a#b c", True),
    ("http://[fe80::1%25en0]/", "http://[fe80::1%25en0]/", True),
]

# compile.go: "CEL result of type <result.Type().TypeName()> could not be converted to bool".
RESULT_TYPES: list[tuple[str, str]] = [
    ("dyn(1u)", "uint"),
    ("dyn([1u][0])", "uint"),
    ("dyn(type(1))", "type"),
    ("dyn(1)", "int"),
    ("dyn('x')", "string"),
    ("dyn(1.5)", "double"),
    ("dyn(b'x')", "bytes"),
    ("dyn(null)", "null_type"),
    ("dyn([1])", "list"),
    ("dyn({})", "map"),
    ("dyn(duration('1s'))", "google.protobuf.Duration"),
    ("dyn(optional.of(1))", "optional_type"),
    ("dyn(quantity('1'))", "kubernetes.Quantity"),
    ("dyn(url('http://a'))", "kubernetes.URL"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("expression", "expected"), STRINGS + FORMAT + GUARDS + JOIN)
def test_answer(engine: str, expression: str, expected: Any) -> None:
    got = _evaluate(expression, engine)
    assert _same(got, expected), f"{expression}: {got!r}, cel-go: {expected!r}"


def _url_parts(text: str) -> str:
    getters = ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath")
    return "[" + ", ".join(f"url({text}).{getter}()" for getter in getters) + "]"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("text", "valid", "expected"), URLS)
def test_url(engine: str, text: str, valid: bool, expected: Any) -> None:
    literal = json.dumps(text, ensure_ascii=False)  # JSON's escapes are CEL's too
    assert _evaluate(f"isURL({literal})", engine) is valid
    if isinstance(expected, Bad):
        message = f"URL parse error during conversion from string: parse {literal}: {expected}"
        assert _same(_evaluate(f"url({literal})", engine), Err(message))
        return
    *parts, query = expected
    assert _evaluate(_url_parts(literal), engine) == parts
    assert _evaluate(f"url({literal}).getQuery()", engine) == query


@pytest.mark.parametrize(("separators", "expected"), [(9999, {"x": ["1"]}), (10000, {})])
def test_url_query_of_more_than_10000_parameters_is_empty(separators: int, expected: dict[str, Any]) -> None:
    """net/url urlmaxqueryparams: ParseQuery refuses the whole query, and Query() drops the error."""
    for engine in ENGINES:
        assert _evaluate(f'url("http://a/?x=1{"&" * separators}").getQuery()', engine) == expected


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("left", "right", "equal"), URL_EQUALITY)
def test_url_equality(engine: str, left: str, right: str, equal: bool) -> None:
    assert _evaluate(f'url("{left}") == url("{right}")', engine) is equal


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("expression", "type_name"), RESULT_TYPES)
def test_non_bool_result_names_its_type(engine: str, expression: str, type_name: str) -> None:
    env = Environment(engine=engine, list_type_attributes=True)  # type: ignore[arg-type]
    with pytest.raises(EvalError) as err:
        compile_expression(expression, env).matches(_DEVICE)
    assert err.value.message == f"CEL result of type {type_name} could not be converted to bool"


# --- the tables against the real API server --------------------------------------------------------


def _cel_literal(value: Any) -> str:
    """``value`` written as a CEL literal (JSON's string escapes are CEL's too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(_cel_literal, value)) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{_cel_literal(k)}: {_cel_literal(v)}" for k, v in value.items()) + "}"


def _url_checks() -> list[tuple[str, Any]]:
    """The URL tables as (expression, expected) rows like the others."""
    rows: list[tuple[str, Any]] = []
    for text, valid, expected in URLS:
        literal = json.dumps(text, ensure_ascii=False)
        rows.append((f"isURL({literal})", valid))
        if isinstance(expected, Bad):
            message = f"URL parse error during conversion from string: parse {literal}: {expected}"
            rows.append((f"url({literal})", Err(message)))
        else:
            *parts, query = expected
            rows += [(_url_parts(literal), list(parts)), (f"url({literal}).getQuery()", query)]
    rows += [(f'url("{left}") == url("{right}")', equal) for left, right, equal in URL_EQUALITY]
    return rows


def test_the_tables_are_what_the_api_server_answers(control_plane: ControlPlane) -> None:
    """One ValidatingAdmissionPolicy (Warn) holds every row, each guarded by the name of the object
    under review: a dry-run ConfigMap named ``values`` runs all the value rows (any warning is a
    wrong value), one named ``row-<i>`` runs error row i alone (its warning holds the error)."""
    rows = STRINGS + FORMAT + GUARDS + JOIN + _url_checks()
    validations = [{"expression": 'object.metadata.name != "probe"', "message": "probe"}]
    for i, (expression, expected) in enumerate(rows):
        check = f"({expression}) == ({expression})" if isinstance(expected, Err) else ""
        check = check or f"({expression}) == {_cel_literal(expected)}"
        guard = "values" if not isinstance(expected, Err) else f"row-{i}"
        validations.append(
            {"expression": f'object.metadata.name != "{guard}" || {check}', "message": f"row {i}"}
        )
    api = control_plane.client()
    name = "cel-go-answers"
    policy: dict[str, Any] = {"failurePolicy": "Fail", "validations": validations}
    policy["matchConstraints"] = {
        "resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
        ]
    }
    policies = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    created = call(api, "POST", policies, {"metadata": {"name": name}, "spec": policy})
    assert created.status == 201, created.message
    binding = {"metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Warn"]}}
    bindings = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    assert call(api, "POST", bindings, binding).status == 201

    def review(object_name: str) -> tuple[str, ...]:
        body = {"metadata": {"name": object_name}}
        answer = call(api, "POST", "/api/v1/namespaces/default/configmaps", body, {"dryRun": "All"})
        assert answer.status == 201, answer.message
        return tuple(answer.warnings)

    try:
        wait_for("the policy to be in force", lambda: review("probe"))
        wrong = [rows[int(warning.rpartition("row ")[2])] for warning in review("values")]
        assert not wrong, f"the API server disagrees with these (expression, expected) rows: {wrong}"
        for i, (_, expected) in enumerate(rows):
            if isinstance(expected, Err):
                (warning,) = review(f"row-{i}")
                assert warning.endswith(f" resulted in error: {expected}"), (i, warning)
    finally:
        call(api, "DELETE", f"{bindings}/{name}")
        call(api, "DELETE", f"{policies}/{name}")
