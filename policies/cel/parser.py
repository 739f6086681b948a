"""A CEL parser faithful to cel-go's grammar (``parser/gen/CEL.g4``) and macro expansion.

Why our own: the Rust engine's parser accepts things cel-go rejects (``a ? b ? c : d : e``) and
rejects things cel-go accepts (``.?``, ``[?``, optional list and map entries), and the checker and
cost estimator need cel-go's AST shape. Behaviours reproduced here:

* operator precedence and associativity of the grammar; ``a ? b ? c : d : e`` is a syntax error;
* reserved words cannot be identifiers (``if``, ``package``...), but may be field names after a
  dot, while ``.true``, ``.false``, ``.null`` and ``.in`` are syntax errors (they are tokens);
* every literal form: decimal/hex ints, ``u`` uints, doubles, single/double/triple-quoted and raw
  strings, ``b`` bytes, escapes ``\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\"\\`\\?``, ``\\xHH``, ``\\uHHHH``,
  ``\\UHHHHHHHH`` and ``\\ooo`` (code points in strings, bytes in bytes literals);
* a leading ``-`` directly before a number is part of the literal (``-9223372036854775808``);
* optional syntax ``x.?f``, ``m[?k]``, ``[?e]``, ``{?k: v}`` (Kubernetes enables optional types);
* the 250 recursion limits of cel-go's parser;
* macros: has, all, exists, exists_one, map (2 and 3 arguments), filter, cel.bind, the two-variable
  comprehensions (all, exists, existsOne, transformList, transformMap, transformMapEntry),
  sortBy, optMap and optFlatMap, expanded exactly like cel-go expands them.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from policies.cel.errors import CompileError
from policies.cel.syntax import (
    ACCUMULATOR,
    ADD,
    BINARY_OPERATORS,
    CONDITIONAL,
    EQUALS,
    INDEX,
    LOGICAL_AND,
    LOGICAL_NOT,
    LOGICAL_OR,
    NEGATE,
    NOT_STRICTLY_FALSE,
    OPT_INDEX,
    OPT_SELECT,
    Call,
    Comprehension,
    Expr,
    Ident,
    ListExpr,
    Literal,
    MapEntry,
    MapExpr,
    Select,
    StructExpr,
    children,
)
from policies.cel.syntax_errors import Token, syntax_errors

# cel-go's parser limits (parser/parser.go): maxRecursionDepth and the expression size in code
# points (the API's 10 KiB byte limit is checked before parsing and is always smaller).
MAX_RECURSION_DEPTH = 250
MAX_CODE_POINTS = 100_000

RESERVED_IDENTIFIERS = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "package",
        "namespace",
        "null",
        "return",
        "true",
        "var",
        "void",
        "while",
    }
)
KEYWORDS = {"true": "TRUE", "false": "FALSE", "null": "NULL", "in": "IN"}

_ESC = r"""\\(?:[abfnrtv"'\\?`]|[xX][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-3][0-7][0-7])"""
_STRING_BODIES = [
    r'"""(?:' + _ESC + r'|[^\\])*?"""',
    r"'''(?:" + _ESC + r"|[^\\])*?'''",
    r'"(?:' + _ESC + r'|[^\\"\n\r])*"',
    r"'(?:" + _ESC + r"|[^\\'\n\r])*'",
]
_RAW_BODIES = [r'[rR]"""[\s\S]*?"""', r"[rR]'''[\s\S]*?'''", r'[rR]"[^"\n\r]*"', r"[rR]'[^'\n\r]*'"]
_STRING = "(?:" + "|".join(_RAW_BODIES + _STRING_BODIES) + ")"

_TOKEN = re.compile(
    r"""
    (?P<ws>[\t \r\n\f]+|//[^\n]*)
  | (?P<bytes>[bB]"""
    + _STRING
    + r""")
  | (?P<string>"""
    + _STRING
    + r""")
  | (?P<float>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<uint>(?:0x[0-9a-fA-F]+|[0-9]+)[uU])
  | (?P<int>0x[0-9a-fA-F]+|[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<esc_ident>`[A-Za-z0-9_./\- ]+`)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>\[\]{}().,\-!?:+*/%])
    """,
    re.VERBOSE,
)


def _location(source: str, offset: int) -> tuple[int, int]:
    """1-based line and column (in code points) of an offset, as cel-go prints them."""
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def format_error(source: str, offset: int | None, message: str) -> CompileError:
    """A CompileError worded like cel-go's issue list: ``ERROR: <input>:L:C: msg`` + snippet.

    As ``common/error.go`` draws it: tabs in the line shown as spaces, and under a character of
    more than one UTF-8 byte a full-width dot (U+FF0E) or caret (U+FF3E)."""
    if offset is None:
        return CompileError(f"ERROR: <input>:-1:0: {message}")
    line, column = _location(source, offset)
    text = (source.split("\n")[line - 1] if source else "").replace("\t", " ")
    dots = "".join("\uff0e" if len(ch.encode()) > 1 else "." for ch in text[: column - 1])
    under = text[column - 1 : column]
    caret = "\uff3e" if len(under.encode()) > 1 else "^"
    snippet = f"\n | {text}\n | {dots}{caret}"
    return CompileError(f"ERROR: <input>:{line}:{column}: {message}{snippet}", column, line)


_SIMPLE_ESCAPE_CHARS = frozenset("abfnrtv\"'\\?`")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _unrecognized(source: str, pos: int) -> str:
    """The text of ANTLR's "token recognition error" at ``pos``: what the lexer consumed before
    it got stuck, up to and including the character it could not take (or to the end of the
    input). For a quote that is the broken string literal (cel-go reports ``'"\\xFh'`` for
    ``"\\xFh"``); for the first character of a two-character operator the character after it
    (``'& '``); for anything else the single character. The lexer goes on after that text."""
    quote = source[pos]
    if quote in "&|=":
        return source[pos : pos + 2]
    if quote == "`":  # ESC_IDENTIFIER: '`' (LETTER | DIGIT | '_' | '.' | '-' | '/' | ' ')+ '`'
        i = pos + 1
        while i < len(source) and (source[i].isascii() and (source[i].isalnum() or source[i] in "_./- ")):
            i += 1
        return source[pos : i + 1]
    if quote not in "\"'":
        return quote
    i = pos + 1
    n = len(source)
    while i < n:
        c = source[i]
        if c in "\n\r":
            return source[pos : i + 1]
        if c != "\\":
            i += 1  # the closing quote never gets here: the literal would have matched
            continue
        if i + 1 >= n:
            break
        e = source[i + 1]
        if e in _SIMPLE_ESCAPE_CHARS:
            i += 2
            continue
        need, digits = {"x": (2, _HEX_DIGITS), "X": (2, _HEX_DIGITS), "u": (4, _HEX_DIGITS)}.get(e, (0, None))
        if e == "U":
            need, digits = 8, _HEX_DIGITS
        elif e in "0123":
            need, digits = 2, frozenset("01234567")
        if digits is None:
            return source[pos : i + 2]
        j = i + 2
        for _ in range(need):
            if j >= n:
                return source[pos:]
            if source[j] not in digits:
                return source[pos : j + 1]
            j += 1
        i = j
    return source[pos:]


def tokenize(source: str) -> tuple[list[Token], list[tuple[int, str]]]:
    """Split into tokens, and ANTLR's "token recognition error" for each stretch the lexer could
    not take (skipped, as ANTLR's lexer skips it)."""
    tokens: list[Token] = []
    errors: list[tuple[int, str]] = []
    pos = 0
    n = len(source)
    while pos < n:
        m = _TOKEN.match(source, pos)
        if m is None:
            text = _unrecognized(source, pos)
            errors.append((pos, f"Syntax error: token recognition error at: '{text}'"))
            pos += len(text)
            continue
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "ident":
            tokens.append(Token(KEYWORDS.get(text, "IDENT"), text, pos))
        elif kind == "op":
            tokens.append(Token(text, text, pos))
        elif kind != "ws":
            tokens.append(Token(kind.upper(), text, pos))
        pos = m.end()
    tokens.append(Token("EOF", "<EOF>", n))
    return tokens, errors


# --- literals ---------------------------------------------------------------------------------------

_SIMPLE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39, '"': 34}
_SIMPLE_ESCAPES.update({"`": 96, "?": 63})


def unescape(text: str, is_bytes: bool) -> str | bytes:
    """The value of a string or bytes literal token (without the b prefix), like cel-go's unescape:
    newlines normalised, raw strings verbatim, \\x and octal escapes are bytes in bytes literals and
    code points in strings."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    raw = text[0] in "rR"
    if raw:
        text = text[1:]
    quote = 3 if text[:3] in ('"""', "'''") else 1
    body = text[quote:-quote]
    if raw or "\\" not in body:
        return body.encode() if is_bytes else body
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = body[i + 1]
        i += 2
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
        elif e in "xXuU":
            width = {"x": 2, "X": 2, "u": 4, "U": 8}[e]
            value = int(body[i : i + width], 16)
            i += width
            if is_bytes and e in "xX":
                out.append(value)
            else:
                out += _code_point(value).encode()
        else:  # octal: the tokenizer guarantees [0-3][0-7][0-7]
            value = int(body[i - 1 : i + 2], 8)
            i += 2
            if is_bytes:
                out.append(value)
            else:
                out += _code_point(value).encode()
    return bytes(out) if is_bytes else out.decode()


def _code_point(value: int) -> str:
    """Go's utf8.EncodeRune: surrogates and out-of-range values become U+FFFD."""
    if value > 0x10FFFF:
        raise ValueError("unable to unescape string")
    if 0xD800 <= value <= 0xDFFF:
        return "\ufffd"
    return chr(value)


_INT_MIN, _INT_MAX, _UINT_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


_HEADROOM_LOCK = threading.Lock()
_headrooms: list[int] = []  # the frames asked for by every block running now, in any thread
_base_limit = 0


@contextmanager
def stack_headroom(frames: int) -> Iterator[None]:
    """Room for ``frames`` more Python frames whatever the caller's depth: 250 nested
    sub-expressions cost a few frames each here, and many more in cel-python's evaluator.

    The recursion limit is one for the whole interpreter, shared by all threads: it is raised by the
    headroom of every block running now, in any thread, and restored when the last one leaves.
    Raising and restoring it per block let two threads interleave and leave it raised for good,
    after which a deep recursion elsewhere overflowed the C stack: the webhook, compiling selectors
    on its pool threads, crashed with SIGSEGV reading a deeply nested body on its event loop
    (issue 16).
    """
    global _base_limit
    with _HEADROOM_LOCK:
        if not _headrooms:
            _base_limit = sys.getrecursionlimit()
        _headrooms.append(frames)
        sys.setrecursionlimit(_base_limit + sum(_headrooms))
    try:
        yield
    finally:
        with _HEADROOM_LOCK:
            _headrooms.remove(frames)
            sys.setrecursionlimit(_base_limit + sum(_headrooms))


# --- the parser -------------------------------------------------------------------------------------


class _Parser:
    """Recursive descent over the token list; ids are assigned in creation order."""

    def __init__(self, source: str, tokens: list[Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.pos = 0
        self.next_id = 1
        self.expr_depth = 0

    # -- helpers --

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind != "EOF":
            self.pos += 1
        return tok

    def error(self, offset: int | None, message: str) -> CompileError:
        return format_error(self.source, offset, message)

    def syntax_error(self, tok: Token, expecting: str) -> CompileError:
        text = tok.text if tok.kind != "EOF" else "<EOF>"
        if tok.kind in ("TRUE", "FALSE", "NULL", "IN") and expecting == "IDENTIFIER":
            return self.error(tok.offset, f"Syntax error: mismatched input '{text}' expecting IDENTIFIER")
        if tok.kind == "EOF":
            return self.error(tok.offset, f"Syntax error: mismatched input '<EOF>' expecting {expecting}")
        return self.error(tok.offset, f"Syntax error: mismatched input '{text}' expecting {expecting}")

    def selection_error(self, dot: Token, tok: Token, optional: bool) -> CompileError:
        """What cel-go's ANTLR parser says when ``.`` or ``.?`` is not followed by a field name.

        A backquoted name is grammatical but cel-go's parser has identifier escapes turned off
        (the Kubernetes environments do not enable them). After ``.?`` only a field name can follow,
        so ANTLR's sync reports the token as extraneous (when a name follows it) or mismatched;
        after ``.`` the select and member-call alternatives both fail to predict: "no viable
        alternative" over the text from the dot to the offending token."""
        if tok.kind == "ESC_IDENT":
            return self.error(tok.offset, "unsupported syntax '`'")
        if optional:
            expecting = "{IDENTIFIER, ESC_IDENTIFIER}"
            if tok.kind != "EOF" and self.peek(1).kind in ("IDENT", "ESC_IDENT"):
                return self.error(
                    tok.offset, f"Syntax error: extraneous input '{tok.text}' expecting {expecting}"
                )
            return self.syntax_error(tok, expecting)
        end = len(self.source) if tok.kind == "EOF" else tok.offset + len(tok.text)
        text = self.source[dot.offset : end]
        return self.error(tok.offset, f"Syntax error: no viable alternative at input '{text}'")

    def expect(self, kind: str, expecting: str | None = None) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.syntax_error(tok, expecting or f"'{kind}'")
        return self.advance()

    def new_id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def ident(self, name: str, offset: int) -> Ident:
        return Ident(self.new_id(), offset, name)

    def literal(self, value: object, kind: str, offset: int) -> Literal:
        return Literal(self.new_id(), offset, value, kind)

    def call(self, function: str, args: list[Expr], offset: int, target: Expr | None = None) -> Call:
        return Call(self.new_id(), offset, function, args, target)

    # -- grammar --

    def parse(self) -> Expr:
        if len(self.source) > MAX_CODE_POINTS:
            raise self.error(
                None,
                "expression code point size exceeds limit: "
                f"size: {len(self.source)}, limit {MAX_CODE_POINTS}",
            )
        depth = 0
        for tok in self.tokens:
            depth += tok.kind in "([{" and len(tok.kind) == 1
            depth -= tok.kind in ")]}" and len(tok.kind) == 1
            if depth >= MAX_RECURSION_DEPTH:
                raise self.error(None, f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")
        with stack_headroom(8 * MAX_RECURSION_DEPTH):
            e = self.parse_expr()
        tok = self.peek()
        if tok.kind != "EOF":
            raise self.error(tok.offset, f"Syntax error: extraneous input '{tok.text}' expecting <EOF>")
        return e

    def parse_expr(self) -> Expr:
        """expr: conditionalOr ('?' conditionalOr ':' expr)?"""
        self.expr_depth += 1
        if self.expr_depth > MAX_RECURSION_DEPTH:
            raise self.error(None, f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")
        cond = self.parse_binary()
        if self.peek().kind == "?":
            op = self.advance()
            if_true = self.parse_binary()
            if self.peek().kind != ":":
                raise self.syntax_error(self.peek(), "':'")
            self.advance()
            if_false = self.parse_expr()
            cond = self.call(CONDITIONAL, [cond, if_true, if_false], op.offset)
        self.expr_depth -= 1
        return cond

    # Relation and arithmetic operators by precedence level (higher binds tighter).
    _LEVEL: dict[str, int] = {"==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "IN": 3}
    _LEVEL.update({"+": 4, "-": 4, "*": 5, "/": 5, "%": 5})

    def parse_binary(self) -> Expr:
        """conditionalOr: conditionalAnd ('||' conditionalAnd)*, as a balanced tree like cel-go's
        logic manager builds (so a long chain of || is not a deep tree)."""
        return self.logical("||", LOGICAL_OR, lambda: self.logical("&&", LOGICAL_AND, self.parse_relation))

    def logical(self, op: str, function: str, term: Callable[[], Expr]) -> Expr:
        terms = [term()]
        ops: list[Token] = []
        while self.peek().kind == op:
            ops.append(self.advance())
            terms.append(term())
        return self.balanced(function, terms, ops)

    def balanced(self, function: str, terms: list[Expr], ops: list[Token]) -> Expr:
        if len(terms) == 1:
            return terms[0]
        mid = len(terms) // 2
        left = self.balanced(function, terms[:mid], ops[: mid - 1])
        right = self.balanced(function, terms[mid:], ops[mid:])
        return self.call(function, [left, right], ops[mid - 1].offset)

    def parse_relation(self) -> Expr:
        """relation and calc: left-associative by precedence, without recursing per operator
        (cel-go's left-recursive rules allow at most 250 operators in a chain)."""
        operands = [self.parse_operand()]
        ops: list[tuple[int, Token]] = []
        count = 0
        while self.peek().kind in self._LEVEL:
            level = self._LEVEL[self.peek().kind]
            while ops and ops[-1][0] >= level:
                self.reduce(operands, ops.pop()[1])
            ops.append((level, self.advance()))
            operands.append(self.parse_operand())
            count += 1
            if count > MAX_RECURSION_DEPTH:
                raise self.error(None, f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")
        while ops:
            self.reduce(operands, ops.pop()[1])
        return operands[0]

    def reduce(self, operands: list[Expr], tok: Token) -> None:
        rhs = operands.pop()
        lhs = operands.pop()
        name = BINARY_OPERATORS["in" if tok.kind == "IN" else tok.kind]
        operands.append(self.expand(name, [lhs, rhs], tok.offset, None))

    def parse_operand(self) -> Expr:
        """unary: member | '!'+ member | '-'+ member; member: primary followed by . [ ( suffixes."""
        tok = self.peek()
        if tok.kind in ("!", "-"):
            ops: list[Token] = []
            while self.peek().kind == tok.kind:
                ops.append(self.advance())
            if tok.kind == "-" and len(ops) == 1 and self.peek().kind in ("INT", "FLOAT"):
                # MINUS directly before a number is the literal's sign (first grammar alternative).
                operand = self.parse_member(sign=ops[0])
            else:
                operand = self.parse_member()
                if len(ops) % 2:
                    name = LOGICAL_NOT if tok.kind == "!" else NEGATE
                    operand = self.call(name, [operand], ops[0].offset)
            return operand
        return self.parse_member()

    def parse_member(self, sign: Token | None = None) -> Expr:
        e = self.parse_primary(sign)
        depth = 0
        while True:
            tok = self.peek()
            if tok.kind == ".":
                self.advance()
                optional = False
                if self.peek().kind == "?":
                    self.advance()
                    optional = True
                name_tok = self.peek()
                if name_tok.kind != "IDENT":
                    raise self.selection_error(tok, name_tok, optional)
                self.advance()
                if self.peek().kind == "(" and not optional:
                    open_tok = self.advance()
                    args = self.parse_args(")")
                    e = self.expand(name_tok.text, args, open_tok.offset, e)
                elif optional:
                    field = self.literal(name_tok.text, "string", name_tok.offset)
                    e = self.call(OPT_SELECT, [e, field], tok.offset)
                else:
                    e = Select(self.new_id(), tok.offset, e, name_tok.text)
            elif tok.kind == "[":
                self.advance()
                function = INDEX
                if self.peek().kind == "?":
                    self.advance()
                    function = OPT_INDEX
                index = self.parse_expr()
                self.expect("]", "']'")
                e = self.call(function, [e, index], tok.offset)
            else:
                return e
            depth += 1
            if depth > MAX_RECURSION_DEPTH:
                raise self.error(None, f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")

    def parse_args(self, close: str) -> list[Expr]:
        args: list[Expr] = []
        if self.peek().kind != close:
            args.append(self.parse_expr())
            while self.peek().kind == ",":
                self.advance()
                args.append(self.parse_expr())
        self.expect(close, f"'{close}'")
        return args

    def parse_primary(self, sign: Token | None) -> Expr:
        tok = self.peek()
        kind = tok.kind
        if sign is not None:
            return self.number(self.advance(), sign)
        if kind in ("INT", "UINT", "FLOAT"):
            return self.number(self.advance(), None)
        if kind in ("STRING", "BYTES"):
            self.advance()
            try:
                value = unescape(tok.text[1:] if kind == "BYTES" else tok.text, kind == "BYTES")
            except ValueError as exc:
                raise self.error(tok.offset, str(exc)) from None
            return self.literal(value, kind.lower(), tok.offset)
        if kind in ("TRUE", "FALSE"):
            self.advance()
            return self.literal(kind == "TRUE", "bool", tok.offset)
        if kind == "NULL":
            self.advance()
            return self.literal(None, "null", tok.offset)
        if kind == "(":
            self.advance()
            e = self.parse_expr()
            self.expect(")", "')'")
            return e
        if kind == "[":
            return self.parse_list()
        if kind == "{":
            return self.parse_map()
        if kind in (".", "IDENT"):
            return self.parse_ident_or_call()
        raise self.syntax_error(
            tok,
            "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
            "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
        )

    def number(self, tok: Token, sign: Token | None) -> Literal:
        text = tok.text
        offset = sign.offset if sign else tok.offset
        if tok.kind == "FLOAT":
            value = float(("-" if sign else "") + text)
            return self.literal(value, "double", offset)
        if tok.kind == "UINT":
            digits = text[:-1]
            value_u = int(digits[2:], 16) if digits.startswith("0x") else int(digits)
            if value_u > _UINT_MAX:
                raise self.error(offset, "invalid uint literal")
            return self.literal(value_u, "uint", offset)
        value_i = int(text[2:], 16) if text.startswith("0x") else int(text)
        if sign:
            value_i = -value_i
        if not _INT_MIN <= value_i <= _INT_MAX:
            raise self.error(offset, "invalid int literal")
        return self.literal(value_i, "int", offset)

    def parse_ident_or_call(self) -> Expr:
        leading = ""
        if self.peek().kind == ".":
            self.advance()
            leading = "."
        tok = self.peek()
        if tok.kind != "IDENT":
            raise self.syntax_error(tok, "IDENTIFIER")
        self.advance()
        # Message construction: a.b.C{...}
        if self.peek().kind == "{" or (self.peek().kind == "." and self._qualified_struct_ahead()):
            return self.parse_struct(leading + tok.text, tok.offset)
        if tok.text in RESERVED_IDENTIFIERS:
            raise self.error(tok.offset, f"reserved identifier: {tok.text}")
        if self.peek().kind == "(":
            open_tok = self.advance()
            args = self.parse_args(")")
            return self.expand(leading + tok.text, args, open_tok.offset, None)
        return self.ident(leading + tok.text, tok.offset)

    def _qualified_struct_ahead(self) -> bool:
        i = 0
        while self.peek(i).kind == "." and self.peek(i + 1).kind == "IDENT":
            i += 2
        return i > 0 and self.peek(i).kind == "{"

    def parse_struct(self, name: str, offset: int) -> Expr:
        while self.peek().kind == ".":
            self.advance()
            name += "." + self.expect("IDENT", "IDENTIFIER").text
        brace = self.expect("{")
        fields: list[tuple[str, Expr]] = []
        while self.peek().kind != "}":
            if self.peek().kind == "?":
                self.advance()
            if self.peek().kind == "ESC_IDENT":
                raise self.error(self.peek().offset, "unsupported syntax '`'")
            field = self.expect("IDENT", "IDENTIFIER")
            self.expect(":", "':'")
            fields.append((field.text, self.parse_expr()))
            if self.peek().kind != ",":
                break
            self.advance()
        self.expect("}", "'}'")
        return StructExpr(self.new_id(), brace.offset, name, fields)

    def parse_list(self) -> Expr:
        open_tok = self.advance()
        elements: list[Expr] = []
        optional: set[int] = set()
        while self.peek().kind != "]":
            if self.peek().kind == "?":
                self.advance()
                optional.add(len(elements))
            elements.append(self.parse_expr())
            if self.peek().kind != ",":
                break
            self.advance()
        self.expect("]", "']'")
        return ListExpr(self.new_id(), open_tok.offset, elements, frozenset(optional))

    def parse_map(self) -> Expr:
        open_tok = self.advance()
        entries: list[MapEntry] = []
        while self.peek().kind != "}":
            optional = False
            if self.peek().kind == "?":
                self.advance()
                optional = True
            key = self.parse_expr()
            colon = self.expect(":", "':'")
            entries.append(MapEntry(key, self.parse_expr(), optional, colon.offset))
            if self.peek().kind != ",":
                break
            self.advance()
        self.expect("}", "'}'")
        return MapExpr(self.new_id(), open_tok.offset, entries)

    # -- macros --

    def expand(self, function: str, args: list[Expr], offset: int, target: Expr | None) -> Expr:
        """Macro expansion (cel-go parser.expandMacro), else a plain call."""
        macro = _MACROS.get((function, len(args), target is not None))
        if macro is not None:
            expanded = macro(self, target, args, offset)
            if expanded is not None:
                return expanded
        return self.call(function, args, offset, target)

    def var_name(self, e: Expr, message: str = "argument must be a simple name") -> str:
        if not isinstance(e, Ident):
            raise self.error(e.offset, message)
        return e.name

    def comprehension(self, offset: int, **fields: object) -> Comprehension:
        return Comprehension(self.new_id(), offset, **fields)  # type: ignore[arg-type]

    def accu(self, offset: int) -> Ident:
        return self.ident(ACCUMULATOR, offset)

    def copy(self, e: Expr) -> Expr:
        """A deep copy with fresh ids (for macros that repeat an operand, like optMap)."""
        if isinstance(e, Literal):
            return self.literal(e.value, e.kind, e.offset)
        if isinstance(e, Ident):
            return self.ident(e.name, e.offset)
        if isinstance(e, Select):
            return Select(self.new_id(), e.offset, self.copy(e.operand), e.field, e.test_only)
        if isinstance(e, Call):
            target = self.copy(e.target) if e.target is not None else None
            return Call(self.new_id(), e.offset, e.function, [self.copy(a) for a in e.args], target)
        if isinstance(e, ListExpr):
            return ListExpr(self.new_id(), e.offset, [self.copy(x) for x in e.elements], e.optional_indices)
        if isinstance(e, MapExpr):
            entries = [
                MapEntry(self.copy(x.key), self.copy(x.value), x.optional, x.offset) for x in e.entries
            ]
            return MapExpr(self.new_id(), e.offset, entries)
        if isinstance(e, StructExpr):
            return StructExpr(self.new_id(), e.offset, e.type_name, [(n, self.copy(v)) for n, v in e.fields])
        assert isinstance(e, Comprehension)
        body = e.body
        new = {c.id: self.copy(c) for c in children(e)}
        return Comprehension(
            self.new_id(),
            e.offset,
            e.iter_var,
            new[e.iter_range.id],
            e.accu_var,
            new[e.accu_init.id],
            new[e.loop_condition.id],
            new[e.loop_step.id],
            new[e.result.id],
            e.iter_var2,
            e.macro,
            _find_copy(e, new, body),
            _find_copy(e, new, e.guard),
            dict(e.extra),
        )


def _find_copy(orig: Comprehension, new: dict[int, Expr], sub: Expr | None) -> Expr | None:
    """The copy of ``sub`` inside a copied comprehension (body and guard are shared sub-trees)."""
    if sub is None:
        return None
    mapping: dict[int, Expr] = {}
    stack = [(c, new[c.id]) for c in children(orig)]
    while stack:
        a, b = stack.pop()
        mapping[a.id] = b
        stack.extend(zip(children(a), children(b), strict=True))
    return mapping.get(sub.id)


MacroFn = Callable[[_Parser, "Expr | None", list[Expr], int], "Expr | None"]


def _has(p: _Parser, target: Expr | None, args: list[Expr], offset: int) -> Expr:
    arg = args[0]
    if not isinstance(arg, Select) or arg.test_only:
        raise p.error(arg.offset, "invalid argument to has() macro")
    return Select(p.new_id(), arg.offset, arg.operand, arg.field, True)


def _quantifier(kind: str) -> MacroFn:
    """all / exists / exists_one with one or two iteration variables."""

    def build(p: _Parser, target: Expr | None, args: list[Expr], offset: int) -> Expr:
        assert target is not None
        names = [p.var_name(a) for a in args[:-1]]
        if len(names) == 2 and names[0] == names[1]:
            raise p.error(args[1].offset, f"duplicate variable name: {names[0]}")
        pred = args[-1]
        if kind == "all":
            init: Expr = p.literal(True, "bool", offset)
            cond: Expr = p.call(NOT_STRICTLY_FALSE, [p.accu(offset)], offset)
            step: Expr = p.call(LOGICAL_AND, [p.accu(offset), pred], offset)
            result: Expr = p.accu(offset)
        elif kind == "exists":
            init = p.literal(False, "bool", offset)
            cond = p.call(NOT_STRICTLY_FALSE, [p.call(LOGICAL_NOT, [p.accu(offset)], offset)], offset)
            step = p.call(LOGICAL_OR, [p.accu(offset), pred], offset)
            result = p.accu(offset)
        else:
            init = p.literal(0, "int", offset)
            cond = p.literal(True, "bool", offset)
            one = p.literal(1, "int", offset)
            step = p.call(
                CONDITIONAL, [pred, p.call(ADD, [p.accu(offset), one], offset), p.accu(offset)], offset
            )
            result = p.call(EQUALS, [p.accu(offset), p.literal(1, "int", offset)], offset)
        return p.comprehension(
            offset,
            iter_var=names[0],
            iter_var2=names[1] if len(names) == 2 else None,
            iter_range=target,
            accu_var=ACCUMULATOR,
            accu_init=init,
            loop_condition=cond,
            loop_step=step,
            result=result,
            macro=kind,
            body=pred,
        )

    return build


def _collect(kind: str) -> MacroFn:
    """map / filter / transformList / transformMap / transformMapEntry."""

    def build(p: _Parser, target: Expr | None, args: list[Expr], offset: int) -> Expr:
        assert target is not None
        two = kind.startswith("transform")
        nvars = 2 if two else 1
        names = [p.var_name(a) for a in args[:nvars]]
        if two and names[0] == names[1]:
            raise p.error(args[1].offset, f"duplicate variable name: {names[0]}")
        rest = args[nvars:]
        guard = rest[0] if len(rest) == 2 else None
        value: Expr = p.ident(names[0], args[0].offset) if kind == "filter" else rest[-1]
        if kind == "filter":
            guard = rest[0]
        if kind in ("transformMap", "transformMapEntry"):
            init: Expr = MapExpr(p.new_id(), offset, [])
            insert_args: list[Expr] = (
                [p.accu(offset), p.ident(names[0], offset), value]
                if kind == "transformMap"
                else [p.accu(offset), value]
            )
            step: Expr = p.call("cel.@mapInsert", insert_args, offset)
        else:
            init = ListExpr(p.new_id(), offset, [])
            step = p.call(ADD, [p.accu(offset), ListExpr(p.new_id(), offset, [value])], offset)
        if guard is not None:
            step = p.call(CONDITIONAL, [guard, step, p.accu(offset)], offset)
        return p.comprehension(
            offset,
            iter_var=names[0],
            iter_var2=names[1] if two else None,
            iter_range=target,
            accu_var=ACCUMULATOR,
            accu_init=init,
            loop_condition=p.literal(True, "bool", offset),
            loop_step=step,
            result=p.accu(offset),
            macro=kind,
            body=guard if kind == "filter" else value,
            guard=None if kind == "filter" else guard,
        )

    return build


def _bind_expr(
    p: _Parser, name: str, init: Expr, body: Expr, offset: int, macro: str = "bind"
) -> Comprehension:
    return p.comprehension(
        offset,
        iter_var="#unused",
        iter_range=ListExpr(p.new_id(), offset, []),
        accu_var=name,
        accu_init=init,
        loop_condition=p.literal(False, "bool", offset),
        loop_step=p.ident(name, offset),
        result=body,
        macro=macro,
        body=body,
    )


def _bind(p: _Parser, target: Expr | None, args: list[Expr], offset: int) -> Expr | None:
    if not (isinstance(target, Ident) and target.name == "cel"):
        return None
    name = p.var_name(args[0], "cel.bind() variable names must be simple identifiers")
    return _bind_expr(p, name, args[1], args[2], offset)


_SORT_INPUT = "@__sortBy_input__"


def _sort_by(p: _Parser, target: Expr | None, args: list[Expr], offset: int) -> Expr:
    assert target is not None
    name = p.var_name(args[0], "sortBy(var, ...) variable name must be a simple identifier")
    keys = _collect("map")(p, p.ident(_SORT_INPUT, offset), [p.ident(name, args[0].offset), args[1]], offset)
    assert keys is not None
    call = p.call("@sortByAssociatedKeys", [keys], offset, p.ident(_SORT_INPUT, offset))
    return _bind_expr(p, _SORT_INPUT, target, call, offset)


def _opt_map(flat: bool) -> MacroFn:
    def build(p: _Parser, target: Expr | None, args: list[Expr], offset: int) -> Expr:
        assert target is not None
        fn = "optFlatMap" if flat else "optMap"
        name = p.var_name(args[0], f"{fn}() variable name must be a simple identifier")
        value = p.call("value", [], offset, p.copy(target))
        bound: Expr = _bind_expr(p, name, value, args[1], offset)
        if not flat:
            bound = p.call("optional.of", [bound], offset)
        has_value = p.call("hasValue", [], offset, target)
        none = p.call("optional.none", [], offset)
        return p.call(CONDITIONAL, [has_value, bound, none], offset)

    return build


_MACROS: dict[tuple[str, int, bool], MacroFn] = {
    ("has", 1, False): _has,
    ("all", 2, True): _quantifier("all"),
    ("exists", 2, True): _quantifier("exists"),
    ("exists_one", 2, True): _quantifier("exists_one"),
    ("all", 3, True): _quantifier("all"),
    ("exists", 3, True): _quantifier("exists"),
    ("existsOne", 3, True): _quantifier("exists_one"),
    ("exists_one", 3, True): _quantifier("exists_one"),
    ("map", 2, True): _collect("map"),
    ("map", 3, True): _collect("map"),
    ("filter", 2, True): _collect("filter"),
    ("transformList", 3, True): _collect("transformList"),
    ("transformList", 4, True): _collect("transformList"),
    ("transformMap", 3, True): _collect("transformMap"),
    ("transformMap", 4, True): _collect("transformMap"),
    ("transformMapEntry", 3, True): _collect("transformMapEntry"),
    ("transformMapEntry", 4, True): _collect("transformMapEntry"),
    ("bind", 3, True): _bind,
    ("sortBy", 2, True): _sort_by,
    ("optMap", 2, True): _opt_map(False),
    ("optFlatMap", 2, True): _opt_map(True),
}


def parse(source: str) -> Expr:
    """Parse and expand macros; raises CompileError with cel-go's wording and position.

    A syntax error is reported together with every other syntax error of the expression, found
    the way cel-go's parser recovers (``syntax_errors``); other errors (a reserved identifier, a
    macro's arguments, the limits) one at a time, as the parser meets them."""
    tokens, errors = tokenize(source)
    first: CompileError | None = None
    try:
        root = _Parser(source, tokens).parse()  # over the tokens the lexer could take
    except CompileError as error:
        if "Syntax error: " not in error.message:
            raise
        first = error
    else:
        if not errors:
            return root
    with stack_headroom(40 * MAX_RECURSION_DEPTH):
        errors += syntax_errors(source, tokens)
    if first is not None and not errors:  # the recognizer saw nothing wrong: report the parser's
        raise first
    raise join_errors(source, errors)


def join_errors(source: str, errors: list[tuple[int, str]]) -> CompileError:
    """Several errors as cel-go's ``Errors.ToDisplayString`` prints them: sorted by position,
    one after the other (the first one's position is the error's)."""
    parts = [format_error(source, offset, message) for offset, message in sorted(errors, key=lambda e: e[0])]
    return CompileError("\n".join(p.message for p in parts), parts[0].column, parts[0].line)


def check_depth(source: str, root: Expr) -> None:
    """cel-go's visitor limit: operators, selections, calls and indexes nested over 250 deep."""
    stack: list[tuple[Expr, int]] = [(root, 0)]
    while stack:
        e, depth = stack.pop()
        if isinstance(e, (Call, Select)):
            depth += 1
            if depth > MAX_RECURSION_DEPTH:
                raise format_error(source, None, "max recursion depth exceeded")
        stack.extend((c, depth) for c in children(e))
