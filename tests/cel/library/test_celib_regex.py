"""RE2 semantics and Go's error texts, where Python's re would answer differently."""

import re

import pytest

from policies.cel.library import RegexError, compile_regex, matches
from policies.cel.library.errors import CELEvalError
from policies.cel.library.regex import find, find_all


@pytest.mark.parametrize(
    ("text", "pattern", "expected"),
    [
        ("é", r"^\w$", False),  # \w is ASCII-only in RE2
        ("٣", r"\d", False),  # so is \d
        ("\u00a0", r"\s", False),  # and \s
        ("xé", r"x\b", True),  # é is not a word character, so there is a boundary
        ("a\n", "a$", False),  # $ does not match before a trailing newline
        ("a{,3}", "^a{,3}$", True),  # {,3} is literal text
        ("x", r"\pL", True),
        ("x", "[[:alpha:]]", True),
        ("a.b", r"^\Qa.b\E$", True),
        ("aaa", "(?U)a+", True),
        ("ab", "(?P<x>a)(?<y>b)", True),
        ("K", "(?i)\u212a", True),  # Kelvin sign folds to K
    ],
)
def test_re2_semantics(text: str, pattern: str, expected: bool) -> None:
    assert matches(text, pattern) is expected


@pytest.mark.parametrize(
    ("text", "pattern"),
    [("é", r"^\w$"), ("a\n", "a$"), ("a{,3}", "^a{,3}$")],
)
def test_python_re_disagrees_on_these(text: str, pattern: str) -> None:
    assert (re.search(pattern, text) is not None) != matches(text, pattern)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(abc", "error parsing regexp: missing closing ): `(abc`"),
        ("[abc", "error parsing regexp: missing closing ]: `[abc`"),
        ("a)", "error parsing regexp: unexpected ): `a)`"),
        ("a{1001}", "error parsing regexp: invalid repeat count: `{1001}`"),
        ("(?=a)", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"),
        ("(?<!a)b", "error parsing regexp: invalid named capture: `(?<!a)b`"),
        ("x(?<=a>)", "error parsing regexp: invalid named capture: `(?<=a>`"),
        (r"(a)\1", "error parsing regexp: invalid escape sequence: `\\1`"),
        (r"\Z", "error parsing regexp: invalid escape sequence: `\\Z`"),
        (r"\C", "error parsing regexp: invalid escape sequence: `\\C`"),
        ("a**", "error parsing regexp: invalid nested repetition operator: `**`"),
        ("*a", "error parsing regexp: missing argument to repetition operator: `*`"),
        ("x\\", "error parsing regexp: trailing backslash at end of expression: ``"),
        ("[z-a]", "error parsing regexp: invalid character class range: `z-a`"),
        ("[[:foo:]]", "error parsing regexp: invalid character class range: `[:foo:]`"),
        ("x{2}{3}", "error parsing regexp: invalid nested repetition operator: `{2}{3}`"),
        ("((a{100}){100})", "error parsing regexp: invalid repeat count: `{100}`"),
    ],
)
def test_bad_patterns_fail_with_go_wording(pattern: str, message: str) -> None:
    with pytest.raises(RegexError) as err:
        compile_regex(pattern)
    assert str(err.value) == message


def test_quoted_capital_c_is_fine() -> None:
    assert matches("C", r"\Q\C\E") is False
    assert matches("\\C", r"^\Q\C\E$") is True


def test_find_and_find_all_follow_go() -> None:
    assert find("abc 123", "[0-9]+") == "123"
    assert find("abc 123", "xyz") == ""
    assert find_all("123 abc 456", "[0-9]+") == ["123", "456"]
    assert find_all("123 abc 456", "[0-9]+", 1) == ["123"]
    assert find_all("123 abc 456", "xyz") == []
    # Go skips an empty match right after a match; Python's finditer does not.
    assert find_all("1, 2, 3, 4", "[0-9]*") == ["1", "", "2", "", "3", "", "4"]
    assert find_all("baaab", "a|") == ["", "a", "a", "a", ""]
    assert find_all("héllo", "", 3) == ["", "", ""]
    assert [m.group(0) for m in re.finditer("[0-9]*", "1, 2")] != find_all("1, 2", "[0-9]*")


def test_find_with_a_bad_pattern_is_illegal_regex() -> None:
    with pytest.raises(CELEvalError, match="Illegal regex: error parsing regexp: missing closing \\]"):
        find("x", "[")
