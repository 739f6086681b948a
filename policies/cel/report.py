"""What a selector does to a set of devices, for the webhook's warnings.

The most common DRA mistake is a misspelled attribute: ``device.attributes["gpu.example.com"].modle``
fails on every device ("no such key: modle"), and the same name guarded by ``has()`` or
``.?modle.orValue(...)`` silently matches nothing. The report lists, besides how many devices match
and which fail (and why), the names the selector reads that none of the devices publishes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from policies.cel.binding import DeviceBinding
from policies.cel.errors import EvalError
from policies.cel.program import Program


@dataclass(frozen=True)
class SelectorReport:
    """``matched`` of ``total`` devices; ``errors`` as (device id, message); ``unknown_names`` as
    (kind, "domain/id") with kind ``attribute`` or ``capacity``."""

    expression: str
    total: int
    matched: int
    errors: tuple[tuple[str, str], ...] = ()
    unknown_names: tuple[tuple[str, str], ...] = ()


def selector_report(program: Program, devices: Iterable[DeviceBinding]) -> SelectorReport:
    """Evaluate ``program`` on every device and summarise."""
    total = matched = 0
    errors: list[tuple[str, str]] = []
    published: set[tuple[str, str, str]] = set()
    for device in devices:
        total += 1
        for kind, section in (("attribute", "attributes"), ("capacity", "capacity")):
            published.update((kind, domain, ident) for domain, ident in device.names(section))
        try:
            matched += program.matches(device)
        except EvalError as exc:
            errors.append((device.device_id, exc.message))
    unknown = tuple(
        (kind, f"{domain}/{ident}")
        for kind, domain, ident in program.names_read()
        if (kind, domain, ident) not in published
    )
    return SelectorReport(program.expression, total, matched, tuple(errors), unknown)
