"""string.format with cel-go's version-1 (Kubernetes strings v2) formatter and its quirks."""

import datetime
import math

import pytest

from policies.cel.library import CELEvalError, StaticArg, UInt, format_static_error
from policies.cel.library.formatting import format_

E = "\u00d710"  # x/text as Kubernetes 1.36 vendors it puts no spaces around the sign


@pytest.mark.parametrize(
    ("template", "args", "expected"),
    [
        ("%s %s", ["a", 1], "a 1"),
        ("%%%s%%", ["x"], "%x%"),
        ("%s", [1e6], "1e+06"),
        ("%s", [[1.5]], "[1.500000]"),  # doubles inside lists print with six decimals
        ("%s", [[b"a", 'a"b', 1.0, -math.inf, None]], '[b"a", "a\\"b", 1.000000, "-Inf", null]'),
        ("%s", [{"b": 1, "a": [None]}], '{"a":[null], "b":1}'),
        ("%d %d", [-7, UInt(7)], "-7 7"),
        ("%x|%X|%o|%b", [-255, "héllo", -8, -5], "-ff|68C3A96C6C6F|-10|-101"),
        ("%b", [True], "1"),
        ("%f", [3.14], "3.140000"),
        ("%.2f", [-1234567.891], "-1,234,567.89"),  # the locale printer groups thousands
        ("%f|%f", ["NaN", math.inf], "NaN|∞"),
        ("%e", [1052.032911275], f"1.052033{E}⁰³"),
        ("%e", [1.2345e-3], f"1.234500{E}⁻⁰³"),
        ("%.2e", [1.0], f"1.000000{E}⁰⁰"),  # the precision becomes a width: still six decimals
        ("[%e][%.1e]", ["Infinity", math.nan], "[     ∞][NaN]"),
        ("%s", [datetime.timedelta(seconds=6347)], "6347s"),
        ("%s", ["unused", "args are ignored"][:1], "unused"),
    ],
)
def test_format(template: str, args: list[object], expected: str) -> None:
    assert format_(template, args) == expected


def test_extra_arguments_are_ignored_at_run_time() -> None:
    assert format_("%s", ["a", "b"]) == "a"


@pytest.mark.parametrize(
    ("template", "args", "message"),
    [
        ("%", [1.0], "unexpected end of string"),
        ("%s %s", [1.0], "index 1 out of range"),
        (
            "%.3",
            [1.0],
            "could not parse formatting clause: error while parsing precision: "
            "could not find end of precision specifier",
        ),
        (
            "%.f",
            [1.0],
            'error while converting precision to integer: strconv.Atoi: parsing "": invalid syntax',
        ),
        ("%é", [1.0], 'unrecognized formatting clause "Ã"'),
        (
            "%d",
            [1.5],
            "error during formatting: decimal clause can only be used on integers, was given double",
        ),
        ("%f", [1], "error during formatting: fixed-point clause can only be used on doubles, was given int"),
        ("%s", [{1.5: 1}], "no formatting function for map key of type double"),
    ],
)
def test_format_errors(template: str, args: list[object], message: str) -> None:
    with pytest.raises(CELEvalError) as err:
        format_(template, args)
    assert message in str(err.value)


def test_static_check_of_literal_calls() -> None:
    assert format_static_error("%d", [StaticArg("int")]) is None
    assert format_static_error("%d", [StaticArg("dyn")]) is None
    assert format_static_error("%d %s", [StaticArg("int")]) == "index 1 out of range"
    assert format_static_error("%s", [StaticArg("int"), StaticArg("int")]) == (
        "too many arguments supplied to string.format (expected 1, got 2)"
    )
    # A DRA attribute is declared as google.protobuf.Any, which is not dyn: "%d" rejects it.
    assert format_static_error("%d", [StaticArg("google.protobuf.Any")]) == (
        "error during formatting: decimal clause can only be used on integers, was given google.protobuf.Any"
    )
    nested = StaticArg("list(dyn)", (StaticArg("int"), StaticArg("optional_type(int)")))
    assert "was given optional_type" in (format_static_error("%s", [nested]) or "")
