"""Why claims do not fit on a node, in terms a person can act on.

Upstream only says "cannot allocate all claims". draguard counts, per request, how many of the
node's devices each check rejected: class and request selectors, devices already allocated or
taken by another request of the same pod, taints, shared counters, capacity, and which claim
constraint refused the rest. The search records only small integer reason codes per device
(``Reason``); the texts are assembled here, after the search has failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Reason(IntEnum):
    """Why one device could not serve one request; the search keeps the highest one it saw.

    The order is the order of the checks, so "highest" means "got furthest"; constraint
    rejections use ``CONSTRAINT + constraint index``.
    """

    SELECTOR_ERROR = 1
    BINDING_CONDITIONS = 2
    CLASS_SELECTOR = 3
    REQUEST_SELECTOR = 4
    OTHER_NODE = 5
    ALLOCATED = 6
    IN_USE = 7
    CAPACITY = 8
    PARTITIONABLE_OFF = 9
    COUNTERS = 10
    TAINTED = 11
    CONSTRAINT = 100
    USABLE = 1000


# JSON key and the phrase used in the summary, per reason: said of one device, then of several.
REASON_TEXT: dict[Reason, tuple[str, str, str]] = {
    Reason.SELECTOR_ERROR: (
        "selectorError",
        "failed to evaluate a selector",
        "failed to evaluate a selector",
    ),
    Reason.BINDING_CONDITIONS: (
        "bindingConditionsUnsupported",
        "needs binding conditions (feature off)",
        "need binding conditions (feature off)",
    ),
    Reason.CLASS_SELECTOR: (
        "classSelector",
        "does not match the device class",
        "do not match the device class",
    ),
    Reason.REQUEST_SELECTOR: (
        "requestSelector",
        "does not match the request's selectors",
        "do not match the request's selectors",
    ),
    Reason.OTHER_NODE: ("otherNode", "belongs to another node", "belong to other nodes"),
    Reason.ALLOCATED: ("allocated", "is already allocated", "are already allocated"),
    Reason.IN_USE: (
        "inUse",
        "is taken by another request of this pod",
        "are taken by another request of this pod",
    ),
    Reason.CAPACITY: ("capacity", "lacks the requested capacity", "lack the requested capacity"),
    Reason.PARTITIONABLE_OFF: (
        "partitionableDisabled",
        "consumes counters (partitionable devices off)",
        "consume counters (partitionable devices off)",
    ),
    Reason.COUNTERS: ("counters", "is out of shared counters", "are out of shared counters"),
    Reason.TAINTED: (
        "tainted",
        "has taints the request does not tolerate",
        "have taints the request does not tolerate",
    ),
}


def _devices(count: int) -> str:
    return f"{count} device" if count == 1 else f"{count} devices"


@dataclass(frozen=True)
class ConstraintRejection:
    """A claim constraint that refused devices which passed every other check."""

    index: int
    kind: str
    attribute: str
    devices: int

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "attribute": self.attribute, "devices": self.devices}


@dataclass(frozen=True)
class SelectorRejection:
    """One class or request selector and how many of the node's devices it turned down."""

    source: str  # "class" or "request"
    index: int
    expression: str
    devices: int

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "index": self.index,
            "expression": self.expression,
            "devices": self.devices,
        }


@dataclass(frozen=True)
class RequestExplanation:
    """How the node's devices fared against one request (or one subrequest alternative)."""

    claim: str
    request: str
    device_class: str
    allocation_mode: str
    wanted: int
    reached: bool
    considered: int
    rejected: dict[str, int] = field(default_factory=dict)
    constraints: tuple[ConstraintRejection, ...] = ()
    selectors: tuple[SelectorRejection, ...] = ()
    usable: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "request": self.request,
            "deviceClass": self.device_class,
            "allocationMode": self.allocation_mode,
            "wanted": self.wanted,
            "reached": self.reached,
            "considered": self.considered,
            "rejected": dict(self.rejected),
            "constraints": [c.to_json() for c in self.constraints],
            "selectors": [s.to_json() for s in self.selectors],
            "usable": self.usable,
        }

    def _selector_detail(self, reason: Reason) -> str:
        """`` (selector #0 <expression>: 3)`` after the class or request selector count."""
        source = {Reason.CLASS_SELECTOR: "class", Reason.REQUEST_SELECTOR: "request"}.get(reason)
        details = [f"#{s.index} {s.expression}: {s.devices}" for s in self.selectors if s.source == source]
        return f" (selector {'; '.join(details)})" if details else ""

    def summary(self) -> str:
        parts = [
            f"{count} {one if count == 1 else several}{self._selector_detail(reason)}"
            for reason, (key, one, several) in REASON_TEXT.items()
            if (count := self.rejected.get(key, 0))
        ]
        parts += [
            f"{c.devices} {'fails' if c.devices == 1 else 'fail'} constraint #{c.index} "
            f"({c.kind} {c.attribute})"
            for c in self.constraints
        ]
        parts.append(f"{self.usable} usable")
        wanted = "all matching devices" if self.allocation_mode == "All" else _devices(self.wanted)
        head = f"claim {self.claim}, request {self.request} (class {self.device_class}) needs {wanted}"
        if not self.reached:
            head += " (not reached: an earlier request could not be satisfied)"
        return f"{head}; {_devices(self.considered)} considered: {', '.join(parts)}"


@dataclass(frozen=True)
class PoolProblem:
    """A pool on the node that could not be used at all."""

    driver: str
    pool: str
    problem: str  # "incomplete" or "invalid"
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"driver": self.driver, "pool": self.pool, "problem": self.problem, "detail": self.detail}

    def summary(self) -> str:
        return f"pool {self.driver}/{self.pool} is {self.problem} ({self.detail})"


@dataclass(frozen=True)
class Explanation:
    """Why the claims do not fit on the node; pure data, ``to_json()`` for the wire."""

    node: str | None
    requests: tuple[RequestExplanation, ...]
    pools: tuple[PoolProblem, ...] = ()
    result_limit_hit: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "requests": [r.to_json() for r in self.requests],
            "pools": [p.to_json() for p in self.pools],
            "resultLimitHit": self.result_limit_hit,
            "message": self.message(),
        }

    def message(self) -> str:
        """One paragraph: every request that was reached, then unusable pools."""
        where = f"node {self.node}" if self.node else "no node"
        lines = [f"cannot allocate all claims on {where}"]
        lines += [r.summary() for r in self.requests if r.reached or r.considered]
        lines += [p.summary() for p in self.pools]
        if self.result_limit_hit:
            lines.append("some alternatives would exceed 32 devices in one claim")
        return "; ".join(lines)

    def __str__(self) -> str:
        return self.message()
