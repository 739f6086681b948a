"""Structured logs: one JSON object per line on stderr, and one line per admission decision.

Log collectors (Loki, Elasticsearch, Cloud Logging) index JSON fields without parsing rules, so
every record, ours and the libraries', goes out as JSON. A decision line carries what an admin
needs to find a request and understand the answer (uid, kind, namespace/name, operation, user,
each rule's outcome, the decision, the latency) and never the object itself: pods carry
environment variables and the review carries the user's extra attributes.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from typing import Any, TextIO

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError
from pydantic_core import to_json

LEVELS = ("debug", "info", "warning", "error")
DECISIONS = logging.getLogger("draguard.admission")


@functools.lru_cache(maxsize=2)
def _second(whole: int) -> str:
    # Lines come thousands a second: the date and time up to the second are formatted once.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


def json_line(created: float, level: str, logger: str, message: str, fields: dict[str, Any]) -> str:
    """``{"time", "level", "logger", "message", ...fields}`` as one line of JSON."""
    line: dict[str, Any] = {
        "time": f"{_second(int(created))}.{int(created % 1 * 1000):03d}Z",
        "level": level,
        "logger": logger,
        "message": message,
    }
    line.update(fields)
    try:
        # pydantic-core's serializer: the same JSON as json.dumps(line, default=str) without the
        # spaces and with UTF-8 left as is, in a quarter of the time (every decision writes a line).
        return to_json(line, fallback=str).decode()
    except ValueError:
        # A string UTF-8 cannot hold (a lone surrogate): the standard library writes it escaped,
        # which is still JSON, so the line is written and never costs the caller its answer.
        return json.dumps(line, default=str, separators=(",", ":"))


class JsonFormatter(logging.Formatter):
    """:func:`json_line` of a record; fields come from ``extra={"fields": {...}}``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        extra = dict(fields) if isinstance(fields, dict) else {}
        if record.exc_info:
            extra["error"] = self.formatException(record.exc_info)
        return json_line(record.created, record.levelname.lower(), record.name, record.getMessage(), extra)


class DecisionLog:
    """One JSON line per admission decision (info when allowed, warning when denied), written
    straight to ``stream`` (default: the stderr of the moment), in :func:`json_line`'s shape.

    Not through the logging machinery: a record, the handler's lock and the generic formatter cost
    half of what recording a request costs, for the one line every request writes (measured on the
    webhook benchmark). The logging configuration still decides, through the level of the
    ``draguard.admission`` logger, whether a line is written.

    Like a logging handler, it never fails its caller: a stream that cannot be written (a closed
    pipe to a log shipper that died) loses the line, not the admission decision.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def write(self, fields: dict[str, Any], allowed: bool) -> None:
        level, name = (logging.INFO, "info") if allowed else (logging.WARNING, "warning")
        if not DECISIONS.isEnabledFor(level):
            return
        line = json_line(time.time(), name, DECISIONS.name, "admission decision", fields)
        stream = self._stream or sys.stderr
        try:
            stream.write(line + "\n")
            stream.flush()
        except (OSError, ValueError):  # ValueError: the stream was closed
            pass


def configure(level: str = "info") -> None:
    """Send every logger's records to stderr as JSON lines at ``level`` and above."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # JsonFormatter prints no caller, thread or process, so records need not collect them: that
    # skips a stack walk and several lookups per record, and there is a record per admission
    # decision (the logging HOWTO's "Optimization" section names these switches).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # aiohttp's access log would add a second, unstructured line per request.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, RefusedInput) for f in server.filters):
        server.addFilter(RefusedInput())


class RefusedInput(logging.Filter):
    """aiohttp's own records about input the server refuses on purpose, without the traceback.

    aiohttp answers a request it cannot parse itself (a ``br`` or ``zstd`` body, which it has no
    decoder for; a broken request line or header) with a 400 and logs the exception with its
    traceback: that becomes one line saying what was refused. After an answer it reads the unread
    rest of the body and, when that does not decode (broken gzip or deflate), logs an "Unhandled
    exception" with a traceback: the request was already answered (and the body's handler, when it
    read the body, logged the refusal), so that record is dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, RequestPayloadError):
            return False
        if isinstance(error, HttpProcessingError):
            record.msg, record.args = "refused a request: %s %s", (error.code, error.message)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def rejected(reason: str, fields: dict[str, Any]) -> None:
    """Log a webhook call that could not be answered with a decision (HTTP 4xx)."""
    DECISIONS.warning("rejected webhook call: %s", reason, extra={"fields": fields})
