"""Go's number and string printing, checked against values printed by Go itself."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.cel.library.gofmt import go_format_f_shortest, go_format_g, go_quote


@pytest.mark.parametrize(
    ("value", "g", "f"),
    [
        (1e6, "1e+06", "1000000"),
        (123456.0, "123456", "123456"),
        (1234567.0, "1.234567e+06", "1234567"),
        (0.0001, "0.0001", "0.0001"),
        (1e-5, "1e-05", "0.00001"),
        (1e21, "1e+21", "1000000000000000000000"),
        (123.456, "123.456", "123.456"),
        (9007199254740993.0, "9.007199254740992e+15", "9007199254740992"),
        (1.7976931348623157e308, "1.7976931348623157e+308", "17976931348623157" + "0" * 292),
    ],
)
def test_format_float_like_go(value: float, g: str, f: str) -> None:
    assert go_format_g(value) == g
    assert go_format_f_shortest(value) == f


def test_special_floats() -> None:
    assert [go_format_g(x) for x in (math.inf, -math.inf, math.nan, -0.0)] == ["+Inf", "-Inf", "NaN", "-0"]


def test_quote_like_go() -> None:
    assert (
        go_quote('a"b\\c\n\x01\u00ad\U0001f600é\u2028\x7f')
        == '"a\\"b\\\\c\\n\\x01\\u00ad\U0001f600é\\u2028\\x7f"'
    )


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_g_format_round_trips(value: float) -> None:
    assert float(go_format_g(value)) == value
    assert float(go_format_f_shortest(value)) == value
