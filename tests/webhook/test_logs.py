"""The JSON log line every record and every admission decision is written as."""

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

from aiohttp.http_exceptions import ContentEncodingError
from aiohttp.web_protocol import RequestPayloadError

from webhook.logs import JsonFormatter, RefusedInput, configure, json_line


def test_a_line_is_time_level_logger_message_then_the_fields() -> None:
    created = datetime(2026, 11, 24, 9, 26, 59, 19000, tzinfo=UTC).timestamp()
    line = json.loads(json_line(created, "info", "draguard.admission", "admission decision", {"uid": "u-1"}))
    assert list(line) == ["time", "level", "logger", "message", "uid"]
    assert line["time"] == "2026-11-24T09:26:59.019Z"
    assert (line["level"], line["logger"], line["message"], line["uid"]) == (
        "info", "draguard.admission", "admission decision", "u-1"
    )  # fmt: skip


def test_each_line_carries_its_own_second() -> None:
    # The text up to the second is formatted once per second: lines of other seconds, earlier or
    # later, must not get a neighbour's.
    base = datetime(2026, 11, 24, 23, 59, 59, tzinfo=UTC).timestamp()
    lines = [json_line(base + delta, "info", "x", "m", {}) for delta in (0.5, 1.25, 0.75, -3.0)]
    times = [json.loads(line)["time"] for line in lines]
    assert times == [
        "2026-11-24T23:59:59.500Z",
        "2026-11-25T00:00:00.250Z",
        "2026-11-24T23:59:59.750Z",
        "2026-11-24T23:59:56.000Z",
    ]


def test_values_json_cannot_write_are_written_as_text_and_unicode_is_kept() -> None:
    fields = {"user": "jörg", "file": Path("/etc/draguard/config.yaml")}
    line = json_line(0.0, "warning", "x", "denied", fields)
    assert "jörg" in line
    assert json.loads(line)["file"] == "/etc/draguard/config.yaml"


def test_the_formatter_writes_records_in_the_same_shape_with_the_error() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        error = sys.exc_info()
    record = logging.LogRecord("draguard.x", logging.ERROR, __file__, 1, "failed %s", ("once",), error)
    record.fields = {"uid": "u-2"}
    line = json.loads(JsonFormatter().format(record))
    shown = (line["level"], line["logger"], line["message"], line["uid"])
    assert shown == ("error", "draguard.x", "failed once", "u-2")
    assert "ValueError: boom" in line["error"]


def test_a_string_utf_8_cannot_hold_is_written_escaped_and_the_line_is_still_json() -> None:
    line = json_line(0.0, "info", "draguard.admission", "admission decision", {"user": "x\udc00", "n": 1})
    assert json.loads(line)["user"] == "x\udc00" and json.loads(line)["n"] == 1
    line.encode()  # the line itself is writable as UTF-8


def refused(error: BaseException, message: str, *args: str) -> logging.LogRecord:
    """The record aiohttp's server logs with ``log_exception`` for ``error``."""
    try:
        raise error
    except type(error):
        info = sys.exc_info()
    return logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, message, args, info)


def test_input_aiohttp_refuses_is_one_line_without_a_traceback() -> None:
    error = ContentEncodingError("Can not decode content-encoding: brotli (br)")
    record = refused(error, "Error handling request from %s", "127.0.0.1")
    assert RefusedInput().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "warning" and "error" not in line
    assert line["message"] == "refused a request: 400 Can not decode content-encoding: brotli (br)"


def test_the_unread_rest_of_an_answered_body_that_does_not_decode_is_not_logged() -> None:
    record = refused(RequestPayloadError("Can not decode content-encoding: gzip"), "Unhandled exception")
    assert not RefusedInput().filter(record)


def test_other_errors_keep_their_traceback() -> None:
    record = refused(KeyError("bug"), "Unhandled exception")
    assert RefusedInput().filter(record)
    assert "KeyError: 'bug'" in json.loads(JsonFormatter().format(record))["error"]


def test_configure_installs_the_filter_once() -> None:
    root, server = logging.getLogger(), logging.getLogger("aiohttp.server")
    saved = (list(root.handlers), root.level, list(server.filters))
    try:
        configure("info")
        configure("info")
        assert sum(isinstance(f, RefusedInput) for f in server.filters) == 1
    finally:
        root.handlers[:], server.filters[:] = saved[0], saved[2]
        root.setLevel(saved[1])
