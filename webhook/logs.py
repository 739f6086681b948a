"""Structured logs: one JSON object per line on stderr, and one line per admission decision.

Log collectors (Loki, Elasticsearch, Cloud Logging) index JSON fields without parsing rules, so
every record, ours and the libraries', goes out as JSON. A decision line carries what an admin
needs to find a request and understand the answer (uid, kind, namespace/name, operation, user,
each rule's outcome, the decision, the latency) and never the object itself: pods carry
environment variables and the review carries the user's extra attributes.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LEVELS = ("debug", "info", "warning", "error")
DECISIONS = logging.getLogger("draguard.admission")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...fields}``; fields come from ``extra={"fields": {...}}``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


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


def decision(fields: dict[str, Any], allowed: bool) -> None:
    """Log one admission decision (info when allowed, warning when denied)."""
    DECISIONS.log(
        logging.INFO if allowed else logging.WARNING, "admission decision", extra={"fields": fields}
    )


def rejected(reason: str, fields: dict[str, Any]) -> None:
    """Log a webhook call that could not be answered with a decision (HTTP 4xx)."""
    DECISIONS.warning("rejected webhook call: %s", reason, extra={"fields": fields})
