"""The JSON log line every record and every admission decision is written as."""

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

from webhook.logs import JsonFormatter, json_line


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
