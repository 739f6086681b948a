"""The parser follows cel-go's grammar: precedence, literals, limits, reserved words, macros."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from policies.cel import CompileError, Environment, compile_expression
from policies.cel.parser import parse, unescape
from policies.cel.syntax import Call, Comprehension, Literal, Select


def _error(expression: str) -> CompileError:
    with pytest.raises(CompileError) as caught:
        compile_expression(expression)
    return caught.value


def test_precedence_builds_the_expected_tree() -> None:
    tree = parse("a || b && c == d + e * f")
    assert isinstance(tree, Call) and tree.function == "_||_"
    rhs = tree.args[1]
    assert isinstance(rhs, Call) and rhs.function == "_&&_"
    eq = rhs.args[1]
    assert isinstance(eq, Call) and eq.function == "_==_"
    add = eq.args[1]
    assert isinstance(add, Call) and add.function == "_+_"
    assert isinstance(add.args[1], Call) and add.args[1].function == "_*_"


def test_minus_before_a_number_belongs_to_the_literal() -> None:
    literal = parse("-9223372036854775808")
    assert isinstance(literal, Literal) and literal.value == -(2**63)
    difference = parse("2 -1")
    assert isinstance(difference, Call) and difference.function == "_-_"


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ('"\\x41\\101\\u0041\\U00000041"', "AAAA"),
        ("'\\'\\\"\\\\\\?\\`'", "'\"\\?`"),
        ('r"\\d+"', "\\d+"),
        ('"""a\r\nb"""', "a\nb"),
        ('"\\ud800"', "\ufffd"),
    ],
)
def test_string_literals(source: str, value: str) -> None:
    literal = parse(source)
    assert isinstance(literal, Literal) and literal.value == value


def test_bytes_escapes_are_bytes_and_unicode_is_utf8() -> None:
    assert unescape('"\\xff\\u00e9"', is_bytes=True) == b"\xff\xc3\xa9"


def test_error_column_is_one_based() -> None:
    assert _error("device.driver ==").column == 17
    assert _error("1 +").column == 4
    assert _error("").column == 1
    assert _error("a ? b ? c : d : e").column == 7


def test_nesting_limit_is_cel_gos() -> None:
    assert compile_expression("(" * 249 + "true" + ")" * 249).expression.startswith("(")
    assert "recursion limit exceeded: 250" in _error("(" * 250 + "true" + ")" * 250).message


def test_long_operator_chains_do_not_exhaust_the_stack() -> None:
    assert compile_expression(" + ".join(["1"] * 200) + " == 200").estimated_cost > 0
    assert "recursion" in _error(" + ".join(["1"] * 300) + " == 300").message


def test_reserved_words_are_fields_but_not_variables() -> None:
    select = parse("x.package")
    assert isinstance(select, Select) and select.field == "package"
    assert "reserved identifier: namespace" in _error("namespace == 1").message
    # cel-go parser_test: `{"a": 1}."a"` is "no viable alternative at input '.\"a\"'": after a dot
    # neither the select nor the member-call alternative can be predicted.
    assert "Syntax error: no viable alternative at input '.in'" in _error("x.in").message


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # ANTLR's lexer reports what it consumed, up to the character it could not take.
        ('"\\xFh"', "token recognition error at: '\"\\xFh'"),
        ('"\\d" == "d"', "token recognition error at: '\"\\d'"),
        ('"abc', "token recognition error at: '\"abc'"),
        ("a.`b+c`", "token recognition error at: '`b+'"),
        # cel-go parser_test: escaped identifiers are grammatical but switched off.
        ("msg.`ident`", "<input>:1:5: unsupported syntax '`'"),
        ('device.attributes["d"].?`model`', "unsupported syntax '`'"),
        # after `.?` only a field name may follow (cel-go parser_test `x{?.`, and sync's deletion).
        ("a.?[1]", "Syntax error: mismatched input '[' expecting {IDENTIFIER, ESC_IDENTIFIER}"),
        ("a.?[b]", "Syntax error: extraneous input '[' expecting {IDENTIFIER, ESC_IDENTIFIER}"),
        ('{"a": 1}."a"', "<input>:1:10: Syntax error: no viable alternative at input '.\"a\"'"),
        # kube-apiserver 1.36: cel-go rewrites this no-viable-alternative (parser.go SyntaxError).
        ("a.true", "Syntax error: mismatched input 'true' expecting IDENTIFIER"),
    ],
)
def test_syntax_errors_are_worded_like_antlr(source: str, message: str) -> None:
    assert message in _error(source).message


def test_macros_expand_like_cel_go() -> None:
    tree = parse("[1].exists(x, x > 0)")
    assert isinstance(tree, Comprehension) and tree.macro == "exists" and tree.accu_var == "@result"
    bind = parse("cel.bind(v, 1, v)")
    assert isinstance(bind, Comprehension) and bind.macro == "bind" and bind.accu_var == "v"
    two = parse("m.all(k, v, v > 0)")
    assert isinstance(two, Comprehension) and (two.iter_var, two.iter_var2) == ("k", "v")
    # cel.bind needs the `cel` receiver; anything else is an ordinary (undeclared) call.
    assert "undeclared reference to 'bind'" in _error("x.bind(v, 1, v)").message


def test_macro_argument_errors() -> None:
    assert "argument must be a simple name" in _error("[1].all(x.y, true)").message
    assert "duplicate variable name: k" in _error("{1: 2}.all(k, k, true)").message


_SYNTAX_ERRORS = yaml.safe_load((Path(__file__).parent / "syntax_errors.yaml").read_text())


@pytest.mark.parametrize("case", _SYNTAX_ERRORS, ids=[c["expr"] for c in _SYNTAX_ERRORS])
def test_every_syntax_error_is_reported_like_the_api_server(case: dict[str, str]) -> None:
    """All the errors, in cel-go's order and wording, one after the other (syntax_errors.yaml)."""
    for engine in ("rust", "celpy"):
        with pytest.raises(CompileError) as err:
            compile_expression(case["expr"], Environment(engine=engine))
        assert err.value.message == "compilation failed: " + case["message"]
