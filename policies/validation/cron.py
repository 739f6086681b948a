"""A CronJob's schedule, parsed as the API server parses it (``github.com/robfig/cron/v3``'s
standard parser: five fields or a ``@descriptor``), with its error texts; and its time zone, as
``time.LoadLocation`` finds it (``pkg/apis/batch/validation`` ``validateScheduleFormat``,
``validateTimeZone``)."""

from __future__ import annotations

import re
import zoneinfo
from functools import cache

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# minute, hour, day of month, month, day of week: (minimum, maximum, names)
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    (0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_DURATION = re.compile(r"([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+")


def schedule_problem(schedule: str) -> str | None:
    """Why the cron parser refuses ``schedule``, or None."""
    if schedule.startswith(("TZ=", "CRON_TZ=")):
        return "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    if schedule.startswith("@"):
        if schedule in _DESCRIPTORS:
            return None
        if schedule.startswith("@every "):
            text = schedule.removeprefix("@every ")
            return (
                None
                if _DURATION.fullmatch(text)
                else f'failed to parse duration {schedule}: time: invalid duration "{text}"'
            )
        return f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    for text, (low, high, names) in zip(fields, _FIELDS, strict=True):
        for part in text.split(","):
            problem = _range_problem(part, low, high, names)
            if problem:
                return problem
    return None


def _range_problem(expr: str, low: int, high: int, names: dict[str, int]) -> str | None:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    if low_and_high[0] in ("*", "?"):
        start, end = low, high
    else:
        start, problem = _value(low_and_high[0], names)
        if problem:
            return problem
        end = start
        if len(low_and_high) == 2:
            end, problem = _value(low_and_high[1], names)
            if problem:
                return problem
        elif len(low_and_high) > 2:
            return f"too many hyphens: {expr}"
    if len(range_and_step) == 2:
        step, problem = _number(range_and_step[1])
        if problem:
            return problem
        if step <= 0:
            return f"step of range should be a positive number: {expr}"
    elif len(range_and_step) > 2:
        return f"too many slashes: {expr}"
    if start < low:
        return f"beginning of range ({start}) below minimum ({low}): {expr}"
    if end > high:
        return f"end of range ({end}) above maximum ({high}): {expr}"
    if start > end:
        return f"beginning of range ({start}) beyond end of range ({end}): {expr}"
    return None


def _value(text: str, names: dict[str, int]) -> tuple[int, str | None]:
    if text.lower() in names:
        return names[text.lower()], None
    return _number(text)


def _number(text: str) -> tuple[int, str | None]:
    if re.fullmatch("[0-9]+", text):
        return int(text), None
    if re.fullmatch("-[0-9]+", text):
        return 0, f"negative number ({text}) not allowed: {text}"
    return 0, f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax'


@cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def time_zone_problem(zone: str) -> str | None:
    """validateTimeZone's words for a zone ``time.LoadLocation`` cannot load (not checked where
    this machine has no time zone database)."""
    if not zone:
        return "timeZone must be nil or non-empty string"
    if zone.lower() == "local":
        return "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
    zones = _zones()
    if zones and zone not in zones and zone != "UTC":
        return f"unknown time zone {zone}"
    return None
