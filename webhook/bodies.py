"""Request bodies, read and decoded the same way on every path (admission reviews and dry-run
questions), so that no input reaches a handler as an exception it did not expect.

Whatever the body, the caller gets the decoded JSON or :class:`BadBody`, whose status and reason are
the answer (HTTP 4xx):

* size: at most ``limit`` bytes once the Content-Encoding is undone (413, the rest left unread);
* Content-Encoding: a body that does not decode as its encoding says is a 400 (aiohttp undoes gzip
  and deflate, and answers the encodings it has no decoder for, ``br`` and ``zstd``, itself);
* text: invalid UTF-8, and ``\\u`` escapes of lone UTF-16 surrogates (``"\\ud800"``), become U+FFFD,
  one per invalid byte or escape, as Go's ``encoding/json`` decodes them (``unquoteBytes`` in
  ``src/encoding/json/decode.go``, kept by the API server's ``sigs.k8s.io/json``): it stores such a string
  that way, so the models see what it would, and a broken quantity is an invalid quantity naming
  its field, a broken user name a name that can be logged;
* JSON: what is not JSON (NaN and Infinity included) is a 400 naming line and column; so is JSON
  nested deeper than :data:`MAX_DEPTH` levels (the API server's decoder allows 10,000);
* shape: :func:`parse_object` wants a JSON object (400).
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from pydantic_core import from_json

CHUNK = 64 * 1024
MAX_DEPTH = 512
# pydantic-core's parser reads up to 200 levels (and its serializer writes up to about 255): the
# most for a body whose objects are written again (the dry run validates a question's pod from its
# JSON form).
FAST_DEPTH = 200


class BadBody(ValueError):
    """A body that cannot be answered: ``status`` (4xx) and the reason, which starts with "body"."""

    def __init__(self, status: int, problem: str) -> None:
        super().__init__(f"body {problem}")
        self.status = status
        self.problem = problem


async def read(request: web.Request, limit: int) -> bytes:
    """The body, decoded from its Content-Encoding; :class:`BadBody` over ``limit`` bytes, when
    the encoding does not decode, or when the client goes away before the body ends (an API server
    restarting mid-request: not a bug of ours to log with a traceback, as it was until the soak
    found it). After a BadBody the connection cannot carry another request (where the body ends is
    unknown): the server closes it after the answer."""
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    content = request.content
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := await content.read(CHUNK):
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            # A review's body has usually arrived whole by now: stop without the read that would
            # only say so (a coroutine and a lock per request, on the webhook's hot path). A
            # stream with an error set is read on, so that the error is raised as before.
            if content.at_eof() and content.exception() is None:
                break
    except RequestPayloadError as err:
        encoding = request.headers.get("Content-Encoding", "")
        cause = getattr(err.__cause__, "message", None) or err.__cause__ or err
        raise BadBody(400, f"cannot be read (Content-Encoding {encoding!r}): {cause}") from None
    except ConnectionResetError:  # aiohttp's payload when the connection is lost mid-body
        raise BadBody(400, f"was cut off after {size} bytes: the client closed the connection") from None
    return b"".join(chunks)


def _too_large(limit: int) -> BadBody:
    return BadBody(413, f"is larger than {limit} bytes")


def parse(body: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``body``; :class:`BadBody` (400) when it is not JSON draguard can read or
    is nested deeper than ``max_depth`` levels."""
    try:
        # pydantic's Rust parser: the same objects as json.loads in about half the time. It refuses
        # invalid UTF-8, lone surrogates and nesting past 200 levels, which the slow path handles.
        return from_json(body, allow_inf_nan=False)
    except ValueError:
        pass
    text = _LONE_SURROGATE.sub(_replace_lone, body.decode("utf-8", _PER_BYTE))
    try:
        return from_json(text, allow_inf_nan=False)
    except ValueError as err:
        if "recursion limit" not in str(err):
            raise BadBody(400, f"is not JSON: {err}") from None
    # Deeper than 200 levels: the standard library reads it, within the interpreter's recursion
    # limit, which is shared by every thread; the depth is checked before it is asked.
    too_deep = BadBody(400, f"is nested deeper than {max_depth} levels, the most draguard reads")
    if max_depth <= FAST_DEPTH or _deeper_than(text, max_depth):
        raise too_deep
    try:
        return json.loads(text, parse_constant=_not_json)
    except RecursionError:  # a recursion limit lowered below MAX_DEPTH plus the caller's frames
        raise too_deep from None
    except ValueError as err:
        raise BadBody(400, f"is not JSON: {err}") from None


def parse_object(body: bytes, expected: str) -> dict[str, Any]:
    """:func:`parse`, and the value must be a JSON object (``expected`` says which, for the reason)."""
    data = parse(body)
    if not isinstance(data, dict):
        raise BadBody(400, f"is not a JSON object: expected {expected}")
    return data


def _per_byte(err: UnicodeError) -> tuple[str, int]:
    # Python's "replace" writes one U+FFFD per maximal invalid sequence; Go writes one per byte.
    assert isinstance(err, UnicodeDecodeError)
    return "\ufffd" * (err.end - err.start), err.end


_PER_BYTE = "draguard-go-replace"
codecs.register_error(_PER_BYTE, _per_byte)

# An escaped backslash (skipped, so that "\\\\ud800" stays the text \ud800), a valid surrogate
# pair (kept), or a lone surrogate (replaced).
_LONE_SURROGATE = re.compile(
    r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def _replace_lone(match: re.Match[str]) -> str:
    token = match.group()
    return token if token == "\\\\" or len(token) == 12 else "\\ufffd"


# A JSON string, escapes included (brackets inside one do not nest), and anything but a bracket.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _deeper_than(text: str, limit: int) -> bool:
    """Whether arrays and objects nest deeper than ``limit`` in ``text`` (which need not be JSON);
    stops at the first level past it, so that a million brackets cost no more than a few."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return any(depth > limit for depth in itertools.accumulate(map(_STEP.__getitem__, brackets)))


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")
