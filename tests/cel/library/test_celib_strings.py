"""Strings extension v2 rows from cel-go's strings_test.go and the 3.7 observations (reworded)."""

# ruff: noqa: RUF001 - the Greek alpha in the samples is deliberate: a two-byte code point

import pytest

from policies.cel.library import CELEvalError
from policies.cel.library import strings as s


def test_char_at_counts_code_points_and_allows_the_end() -> None:
    assert s.char_at("tacocat", 3) == "o"
    assert s.char_at("tacocat", 7) == ""
    assert [s.char_at("©αT", i) for i in range(3)] == ["©", "α", "T"]
    for index in (8, -1):
        with pytest.raises(CELEvalError, match=f"index out of range: {index}"):
            s.char_at("tacocat", index)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tacocat", ""), 0),
        (("tacocat", "ac"), 1),
        (("tacocat", "none"), -1),
        (("", ""), 0),
        (("tacocat", "", 3), 3),
        (("hello", "", 10), 10),  # an empty needle returns the start, even past the end
        (("tacocat", "a", 3), 5),
        (("ta©o©αT", "©"), 2),
        (("ta©o©αT", "©", 3), 4),
        (("ta©o©αT", "©α", 5), -1),
    ],
)
def test_index_of(args: tuple[str, str] | tuple[str, str, int], expected: int) -> None:
    assert s.index_of(*args) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tacocat", "a", 7), -1),  # a start at or past the end finds nothing (cel-go PR #1052)
        (("tacocat", "a", 70), -1),
        (("", "a"), -1),
        (("", "a", 0), -1),
    ],
)
def test_index_of_past_the_end_finds_nothing(args: tuple[str, str, int], expected: int) -> None:
    assert s.index_of(*args) == expected


def test_index_of_negative_start_is_out_of_range() -> None:
    with pytest.raises(CELEvalError, match="index out of range: -1"):
        s.index_of("tacocat", "a", -1)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tacocat", ""), 7),
        (("tacocat", "at"), 5),
        (("tacocat", "none"), -1),
        (("", ""), 0),
        (("tacocat", "", 3), 3),
        (("tacocat", "a", 3), 1),
        (("ta©o©αT", "©"), 4),
        (("ta©o©αT", "©", 3), 2),
        (("ta©o©αT", "©α", 4), 4),
        (("hello wello", "hello wello"), 0),
    ],
)
def test_last_index_of(args: tuple[str, str] | tuple[str, str, int], expected: int) -> None:
    assert s.last_index_of(*args) == expected


def test_last_index_of_out_of_range() -> None:
    with pytest.raises(CELEvalError, match="index out of range: -1"):
        s.last_index_of("tacocat", "a", -1)
    assert s.last_index_of("", "a") == -1  # not lastIndexOf("a", -1): nothing to search
    assert s.last_index_of("tacocat", "a", 7) == -1
    assert s.last_index_of("", "a", 0) == -1


def test_ascii_case_leaves_other_letters_alone() -> None:
    assert s.lower_ascii("TacoCÆt Xii") == "tacocÆt xii"
    assert s.upper_ascii("tacoCαt") == "TACOCαT"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("{0} days {0} hours", "{0}", "2"), "2 days 2 hours"),
        (("{0} days {0} hours", "{0}", "2", 1), "2 days {0} hours"),
        (("{0} days {0} hours", "{0}", "2", -1), "2 days 2 hours"),
        (("{0} days {0} hours", "{0}", "2", 0), "{0} days {0} hours"),
        (("hello", "", "_"), "_h_e_l_l_o_"),
        (("héllo", "", "_", 3), "_h_é_llo"),
    ],
)
def test_replace(args: tuple[str, str, str] | tuple[str, str, str, int], expected: str) -> None:
    assert s.replace(*args) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("hello world events!", " ", 0), []),
        (("hello world events!", " ", 1), ["hello world events!"]),
        (("hello world events!", " ", 2), ["hello", "world events!"]),
        (("hello world events!", " ", -1), ["hello", "world", "events!"]),
        (("a©b", ""), ["a", "©", "b"]),
        (("abc", "", 2), ["a", "bc"]),
        (("", ","), [""]),
        (("", ""), []),
    ],
)
def test_split(args: tuple[str, str] | tuple[str, str, int], expected: list[str]) -> None:
    assert s.split(*args) == expected


def test_substring() -> None:
    assert s.substring("tacocat", 4) == "cat"
    assert s.substring("tacocat", 7) == ""
    assert s.substring("ta©o©αT", 2, 6) == "©o©α"
    for args, message in [
        ((40,), "index out of range: 40"),
        ((1, 50), "index out of range: 50"),
        ((4, 3), "invalid substring range. start: 4, end: 3"),
    ]:
        with pytest.raises(CELEvalError, match=message):
            s.substring("tacocat", *args)


def test_trim_uses_go_unicode_space() -> None:
    assert s.trim(" \f\n\r\t\vtext  ") == "text"
    assert s.trim("\u0085\u00a0\u1680text\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000") == "text"
    zero_width = "\u180e\u200b\u200c\u200d\u2060\ufefftext"
    assert s.trim(zero_width) == zero_width
    assert s.trim("\x1ctext") == "\x1ctext"  # Python's strip() would remove this


def test_join_and_quote() -> None:
    assert s.join(["x", "y"]) == "xy"
    assert s.join(["x", "y"], "-") == "x-y"
    assert s.join([], "/") == ""
    # Version 2's joinValSeparator names the element as Go's %v prints it.
    with pytest.raises(CELEvalError, match=r"^join: invalid input: 1$"):
        s.join(["x", 1])
    with pytest.raises(CELEvalError, match=r"^join: invalid input: \[1, 2\]$"):
        s.join(["x", [1, 2]])
    with pytest.raises(CELEvalError, match=r"^join: invalid input: \{b: 1, a: \[104 105\]\}$"):
        s.join([{"b": 1, "a": b"hi"}])
    with pytest.raises(CELEvalError, match=r"^join: invalid input: 1e\+20$"):
        s.join([1e20])
    assert s.quote("first\nsecond") == '"first\\nsecond"'
    assert s.quote('\b\f\r\t\v\\"') == '"\\b\\f\\r\\t\\v\\\\\\""'
    assert s.quote("printable unicode😀") == '"printable unicode😀"'
