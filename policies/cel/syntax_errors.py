"""Every syntax error of an expression, found the way cel-go's ANTLR parser recovers from each.

cel-go reports all the syntax errors of an expression, sorted by position and joined by newlines
(``common/errors.go``), not just the first: its generated parser recovers from each error with
ANTLR's ``DefaultErrorStrategy`` (``github.com/antlr4-go/antlr/v4``, ``error_strategy.go``) and
goes on. This module replays that strategy over the CEL grammar (``parser/gen/CEL.g4``), on the
token list ``parser.tokenize`` makes (which goes on after a token recognition error the way
ANTLR's lexer does). It builds no tree and runs only for expressions that failed to parse.

The strategy, as the generated parser applies it:

* a token that does not match is *extraneous* when the one after it would (it is skipped),
  *missing* when the current token could follow the expected one (it is assumed), and a
  *mismatched input* otherwise, which abandons the current rule;
* at a point that needs one of a set of tokens (the start of ``unary``, ``primary``, an optional
  part followed by a required one), a token outside the set is skipped if the next one is in it,
  and is a mismatched input otherwise; after each ``!`` or ``-`` of a prefix run, a token that
  cannot follow is reported as extraneous and skipped along with what follows it, up to a token
  the rule or its callers can use;
* a decision no alternative can take is "no viable alternative at input" with the text from
  where the decision started to the offending token;
* an abandoned rule skips tokens up to one that can follow some rule on the call stack;
* after an error, further errors are not reported until a token has been matched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Tokens = frozenset[str]


@dataclass(frozen=True)
class Token:
    """A token of the parser's lexer (``parser.tokenize``)."""

    kind: str  # INT UINT FLOAT STRING BYTES IDENT ESC_IDENT TRUE FALSE NULL IN EOF or the operator text
    text: str
    offset: int


# Token kinds (parser.Token.kind) as ANTLR orders and names them in "expecting {...}" lists.
_OPERATORS = [
    "==",
    "!=",
    "in",
    "<",
    "<=",
    ">=",
    ">",
    "&&",
    "||",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    ".",
    ",",
    "-",
    "!",
    "?",
    ":",
    "+",
    "*",
    "/",
    "%",
]
_DISPLAY: dict[str, tuple[int, str]] = {
    "EOF": (-1, "<EOF>"),
    **{("IN" if op == "in" else op): (i, f"'{op}'") for i, op in enumerate(_OPERATORS, 1)},
    "TRUE": (26, "'true'"),
    "FALSE": (27, "'false'"),
    "NULL": (28, "'null'"),
    "FLOAT": (31, "NUM_FLOAT"),
    "INT": (32, "NUM_INT"),
    "UINT": (33, "NUM_UINT"),
    "STRING": (34, "STRING"),
    "BYTES": (35, "BYTES"),
    "IDENT": (36, "IDENTIFIER"),
    "ESC_IDENT": (37, "ESC_IDENTIFIER"),
}

_LITERAL = frozenset({"-", "TRUE", "FALSE", "NULL", "FLOAT", "INT", "UINT", "STRING", "BYTES"})
_PRIMARY = _LITERAL | {"[", "{", "(", ".", "IDENT"}
_EXPR = _PRIMARY | {"!"}  # FIRST(expr) = FIRST(unary)
_OPT_EXPR = _EXPR | {"?"}
_NAME = frozenset({"IDENT", "ESC_IDENT"})
_OPT_FIELD = _NAME | {"?"}
_RELATIONS = frozenset({"<", "<=", ">=", ">", "==", "!=", "IN"})
_MULTIPLICATIONS, _ADDITIONS = frozenset({"*", "/", "%"}), frozenset({"+", "-"})
_NUMBERS = frozenset({"INT", "FLOAT"})
_NOTHING: Tokens = frozenset()
# cel-go rewrites ANTLR's message for a reserved word after a dot (parser.go SyntaxError).
_RESERVED_AFTER_DOT = re.compile(r"no viable alternative at input '.(true|false|null)'")


def show(tokens: Iterable[str]) -> str:
    """An IntervalSet as ANTLR prints it: one name, or ``{a, b}`` in token-type order."""
    names = [_DISPLAY[k][1] for k in sorted(tokens, key=lambda k: _DISPLAY[k][0])]
    return names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"


def _quote(text: str) -> str:
    """ANTLR's quoting of token text in messages (escapeWSAndQuote)."""
    return "'" + text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "'"


class _Failure(Exception):
    """A RecognitionException: the message ANTLR reports for it and the offending token."""

    def __init__(self, token: Token, message: str) -> None:
        super().__init__(message)
        self.token = token
        self.message = message


class _Recognizer:
    """The CEL grammar's rules with ANTLR's error strategy (see the module docstring).

    ``follows`` holds, for each rule invocation on the call stack, what may follow it in its
    caller and whether the caller may end right after it; together they give ANTLR's expected
    tokens (following the stack while rules may end) and its recovery set (all of them).
    """

    def __init__(self, source: str, tokens: list[Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.pos = 0
        self.errors: list[tuple[int, str]] = []
        self.recovering = False
        self.last_error_pos = -1
        self.last_error_states: set[str] = set()
        self.follows: list[tuple[Tokens, bool]] = []

    # -- token stream --

    def la(self, k: int = 1) -> Token:
        return self.tokens[min(self.pos + k - 1, len(self.tokens) - 1)]

    def consume(self) -> None:
        if self.la().kind != "EOF":
            self.pos += 1

    def display(self, tok: Token) -> str:
        return "'<EOF>'" if tok.kind == "EOF" else _quote(tok.text)

    # -- what may come next --

    def expected(self, local: Tokens, may_end: bool) -> Tokens:
        """Tokens valid here: ``local``, and when the rule may end here what follows it."""
        out = set(local)
        if may_end:
            for follow, caller_may_end in reversed(self.follows):
                out |= follow
                if not caller_may_end:
                    break
        return frozenset(out)

    def recovery_set(self) -> Tokens:
        return frozenset().union(*(follow for follow, _ in self.follows))

    # -- reporting --

    def report(self, tok: Token, message: str) -> None:
        """Report unless already recovering from an error (then stay quiet until a match)."""
        if self.recovering:
            return
        self.recovering = True
        text = _RESERVED_AFTER_DOT.sub(r"mismatched input '\1' expecting IDENTIFIER", message)
        self.errors.append((tok.offset, f"Syntax error: {text}"))

    def matched(self) -> None:
        self.recovering = False
        self.last_error_pos = -1
        self.last_error_states.clear()

    def mismatch(self, expected: Tokens) -> _Failure:
        tok = self.la()
        return _Failure(tok, f"mismatched input {self.display(tok)} expecting {show(expected)}")

    def no_viable_alternative(self, start: Token, offending: Token) -> _Failure:
        end = len(self.source) if offending.kind == "EOF" else offending.offset + len(offending.text)
        text = _quote(self.source[start.offset : end])
        return _Failure(offending, f"no viable alternative at input {text}")

    # -- DefaultErrorStrategy --

    def match(self, kind: str, after: Tokens = _NOTHING, may_end: bool = False) -> None:
        """Match one token; ``after``/``may_end`` say what may follow it (for a missing token)."""
        if self.la().kind == kind:
            self.consume()
            self.matched()
            return
        if self.la(2).kind == kind:  # single token deletion
            self.report(self.la(), f"extraneous input {self.display(self.la())} expecting {show({kind})}")
            self.consume()
            self.consume()
            self.matched()
            return
        if self.la().kind in self.expected(after, may_end):  # single token insertion
            self.report(self.la(), f"missing {show({kind})} at {self.display(self.la())}")
            return
        raise self.mismatch(frozenset({kind}))

    def sync(self, local: Tokens) -> None:
        """Sync at a block start whose alternatives need one of ``local``."""
        if self.recovering or self.la().kind in local:
            return
        if self.la(2).kind in local:
            self.report(self.la(), f"extraneous input {self.display(self.la())} expecting {show(local)}")
            self.consume()
            self.matched()
            return
        raise self.mismatch(local)

    def sync_loop_back(self, local: Tokens) -> None:
        """Sync after an iteration of a loop that must be followed by one of ``local``."""
        if self.recovering or self.la().kind in local:
            return
        self.report(self.la(), f"extraneous input {self.display(self.la())} expecting {show(local)}")
        self.consume_until(local | self.recovery_set())

    def consume_until(self, stop: Tokens) -> None:
        while self.la().kind != "EOF" and self.la().kind not in stop:
            self.consume()

    def rule(self, state: str, follow: Tokens, may_end: bool, body: Callable[..., None], *args: int) -> None:
        """Invoke a rule: on a failure inside it, report, then skip to a token a caller can use."""
        self.follows.append((follow, may_end))
        try:
            body(*args)
        except _Failure as failure:
            self.report(failure.token, failure.message)
            site = f"{state}: {failure.message}"  # stands for the ATN state of the failure
            if self.last_error_pos == self.pos and site in self.last_error_states:
                self.consume()  # ANTLR's failsafe against failing again on the same token
            self.last_error_pos = self.pos
            self.last_error_states.add(site)
            self.consume_until(self.recovery_set())
        finally:
            self.follows.pop()

    # -- the grammar --

    def start(self) -> None:
        try:
            self.rule("expr", frozenset({"EOF"}), False, self.expr)
            self.match("EOF")
        except _Failure as failure:
            self.report(failure.token, failure.message)

    def expr(self) -> None:
        self.rule("conditionalOr", frozenset({"?"}), True, self.conditional_or)
        if self.la().kind == "?":
            self.match("?")
            self.rule("conditionalOr", frozenset({":"}), False, self.conditional_or)
            self.match(":", _EXPR)
            self.rule("expr", _NOTHING, True, self.expr)

    def separated(
        self, separator: str, state: str, body: Callable[..., None], *args: int, more: Tokens | None = None
    ) -> None:
        """body (separator body)*; with ``more``, the loop goes on only when one of those tokens
        follows the separator (ANTLR's two-token decision where a trailing separator may end it)."""
        follow = frozenset({separator})
        self.rule(state, follow, True, body, *args)
        while self.la().kind == separator and (more is None or self.la(2).kind in more):
            self.match(separator)
            self.rule(state, follow, True, body, *args)

    def conditional_or(self) -> None:
        self.separated("||", "conditionalAnd", self.conditional_and)

    def conditional_and(self) -> None:
        self.separated("&&", "relation", self.relation, 0)

    def relation(self, precedence: int) -> None:
        """relation[_p]: calc ({precpred 1}? op relation[2])* (ANTLR's left-recursion rewrite)."""
        self.rule("calc", _RELATIONS, True, self.calc, 0)
        while self.la().kind in _RELATIONS and precedence <= 1:
            self.consume()
            self.matched()
            self.rule("relation", _RELATIONS, True, self.relation, 2)

    def calc(self, precedence: int) -> None:
        """calc[_p]: unary ({precpred 2}? (*|/|%) calc[3] | {precpred 1}? (+|-) calc[2])*."""
        ops = _MULTIPLICATIONS | _ADDITIONS
        self.rule("unary", ops, True, self.unary)
        while True:
            kind = self.la().kind
            if kind in _MULTIPLICATIONS and precedence <= 2:
                inner = 3
            elif kind in _ADDITIONS and precedence <= 1:
                inner = 2
            else:
                return
            self.consume()
            self.matched()
            self.rule("calc", ops, True, self.calc, inner)

    def unary(self) -> None:
        self.sync(_EXPR)
        first = self.la()
        if first.kind == "!":
            self.prefixed("!")
        elif first.kind == "-" and self.la(2).kind in _NUMBERS:
            self.member_rule()  # a signed literal: the first alternative wins the ambiguity
        elif first.kind == "-":
            if self.la(2).kind not in _PRIMARY:
                raise self.no_viable_alternative(first, self.la(2))
            self.prefixed("-")
        elif first.kind in _PRIMARY:
            self.member_rule()
        else:
            raise self.no_viable_alternative(first, first)

    def prefixed(self, op: str) -> None:
        """(op)+ member: after each op another op or a member must follow."""
        while True:
            self.match(op)
            self.sync_loop_back(_PRIMARY | {op})
            tok = self.la()
            if tok.kind != op:
                break
            if op == "-" and self.la(2).kind not in _PRIMARY:
                raise self.no_viable_alternative(tok, self.la(2))
        if self.la().kind not in _PRIMARY:
            raise self.no_viable_alternative(self.la(), self.la())
        self.member_rule()

    def member_rule(self) -> None:
        self.rule("member", _NOTHING, True, self.member)

    def member(self) -> None:
        """member: primary ('.' '?'? escapeIdent | '.' IDENTIFIER '(' exprList? ')' | '[' '?'? expr ']')*."""
        self.rule("primary", frozenset({".", "["}), True, self.primary)
        while True:
            tok = self.la()
            if tok.kind == "[":
                self.match("[")
                self.sync(_OPT_EXPR)
                if self.la().kind == "?":
                    self.match("?")
                self.rule("expr", frozenset({"]"}), False, self.expr)
                self.match("]", frozenset({".", "["}), True)
            elif tok.kind != ".":
                return
            elif self.la(2).kind == "IDENT" and self.la(3).kind == "(":
                self.match(".")
                self.match("IDENT")
                self.call_arguments()
            elif self.la(2).kind in _OPT_FIELD:
                self.match(".")
                self.sync(_OPT_FIELD)
                if self.la().kind == "?":
                    self.match("?")
                self.rule("escapeIdent", frozenset({".", "["}), True, self.escape_ident)
            else:
                raise self.no_viable_alternative(tok, self.la(2))

    def call_arguments(self) -> None:
        """'(' exprList? ')'."""
        self.match("(")
        self.sync(_EXPR | {")"})
        if self.la().kind in _EXPR:
            self.rule("exprList", frozenset({")"}), False, self.expr_list)
        self.match(")", frozenset({".", "["}), True)

    def escape_ident(self) -> None:
        self.sync(_NAME)
        if self.la().kind not in _NAME:
            raise self.no_viable_alternative(self.la(), self.la())
        self.match(self.la().kind)

    def primary(self) -> None:
        self.sync(_PRIMARY)
        tok = self.la()
        kind = tok.kind
        if kind in (".", "IDENT"):
            self.named()
        elif kind == "(":
            self.match("(")
            self.rule("expr", frozenset({")"}), False, self.expr)
            self.match(")", frozenset({".", "["}), True)
        elif kind == "[":
            self.aggregate("[", "]", "listInit", _OPT_EXPR, self.list_init)
        elif kind == "{":
            self.aggregate("{", "}", "mapInitializerList", _OPT_EXPR, self.map_init)
        elif kind == "-" and self.la(2).kind not in _NUMBERS:
            raise self.no_viable_alternative(tok, self.la(2))
        elif kind in _LITERAL:
            self.consume()
            if kind == "-":
                self.consume()
            self.matched()
        else:
            raise self.no_viable_alternative(tok, tok)

    def named(self) -> None:
        """'.'? IDENTIFIER, then a call's arguments or a message's fields, or nothing."""
        start = self.la()
        offset = 1 if start.kind == "." else 0
        if self.la(1 + offset).kind != "IDENT":
            raise self.no_viable_alternative(start, self.la(1 + offset))
        i = 2 + offset
        while self.la(i).kind == "." and self.la(i + 1).kind == "IDENT":
            i += 2
        message = self.la(i).kind == "{"
        if offset:
            self.match(".")
        self.match("IDENT")
        if message:
            self.sync(frozenset({".", "{"}))
            while self.la().kind == ".":
                self.match(".")
                self.match("IDENT")
                self.sync_loop_back(frozenset({".", "{"}))
            self.aggregate("{", "}", "fieldInitializerList", _OPT_FIELD, self.field_init)
        elif self.la().kind == "(":
            self.call_arguments()

    def aggregate(
        self, open_: str, close: str, state: str, first: Tokens, entries: Callable[[], None]
    ) -> None:
        """open entries? ','? close (lists, maps, messages)."""
        self.match(open_)
        ends = frozenset({",", close})
        self.sync(first | ends)
        if self.la().kind in first:
            self.rule(state, ends, False, entries)
        self.sync(ends)
        if self.la().kind == ",":
            self.match(",")
        self.match(close, frozenset({".", "["}), True)

    def expr_list(self) -> None:
        self.separated(",", "expr", self.expr)

    def list_init(self) -> None:
        self.separated(",", "optExpr", self.opt_expr, more=_OPT_EXPR)

    def opt_expr(self) -> None:
        self.sync(_OPT_EXPR)
        if self.la().kind == "?":
            self.match("?")
        self.rule("expr", _NOTHING, True, self.expr)

    def map_init(self) -> None:
        self.entries(_OPT_EXPR, "optExpr", self.opt_expr)

    def field_init(self) -> None:
        self.entries(_OPT_FIELD, "optField", self.opt_field)

    def entries(self, first: Tokens, state: str, key: Callable[[], None]) -> None:
        """key ':' expr (',' key ':' expr)*."""
        while True:
            self.rule(state, frozenset({":"}), False, key)
            self.match(":", _EXPR)
            self.rule("expr", frozenset({","}), True, self.expr)
            if not (self.la().kind == "," and self.la(2).kind in first):
                return
            self.match(",")

    def opt_field(self) -> None:
        self.sync(_OPT_FIELD)
        if self.la().kind == "?":
            self.match("?")
        self.rule("escapeIdent", _NOTHING, True, self.escape_ident)


def syntax_errors(source: str, tokens: list[Token]) -> list[tuple[int, str]]:
    """The syntax errors cel-go reports for ``tokens`` (the parser's), as (offset, message)."""
    recognizer = _Recognizer(source, tokens)
    recognizer.start()
    return recognizer.errors
