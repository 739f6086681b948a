"""What a selector does to a set of devices, for the webhook's warnings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from policies.cel.binding import DeviceBinding
from policies.cel.errors import EvalError
from policies.cel.program import Program


@dataclass(frozen=True)
class SelectorReport:
    """``matched`` of ``total`` devices; ``errors`` as (device id, message); ``unknown_names``:
    qualified attribute/capacity names the selector reads that no device of the driver publishes
    (a misspelled attribute silently matches nothing, the most common DRA mistake)."""

    expression: str
    total: int
    matched: int
    errors: tuple[tuple[str, str], ...] = ()
    unknown_names: tuple[str, ...] = field(default=())


def selector_report(program: Program, devices: Iterable[DeviceBinding]) -> SelectorReport:
    """Evaluate ``program`` on every device and summarise."""
    total = matched = 0
    errors: list[tuple[str, str]] = []
    for device in devices:
        total += 1
        try:
            matched += program.matches(device)
        except EvalError as exc:
            errors.append((device.device_id, exc.message))
    return SelectorReport(program.expression, total, matched, tuple(errors))
