"""Consumable capacity (DRAConsumableCapacity): how much of a device a request consumes.

Upstream 1.36: ``structured/internal/incubating/consumable_capacity.go`` (``CmpRequestOverCapacity``,
``GetConsumedCapacityFromRequest``, request-policy rounding and violation checks). The behaviour
kept on purpose, quirks included (dra-reference 4.11 and 4.16a):

* the check runs for every device, multi-allocatable or not; for a dedicated device it only
  filters "requested <= value";
* a capacity the request does not name costs the policy default, or the *whole* value;
* request keys are matched literally against the device's capacity names;
* a ``validRange`` step rounds in whole units (``Quantity.Value()``, so ``500m`` counts as 1) and
  the rounded amount is reported in binary-SI form (``45G`` with step ``10G`` -> ``48828125Ki``).

Amounts are compared as exact integers of nano-units (Go's Quantity never holds anything finer).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from policies.api.quantity import Format, Quantity
from policies.api.resource import DeviceCapacity

_NANO = 10**9

# What a request asks of a device's capacities, by value: sorted (capacity name, nano-units) pairs,
# or None for a request without capacity requests.
RequestKey = tuple[tuple[str, int], ...] | None


@functools.lru_cache(maxsize=4096)
def nanos(q: Quantity) -> int:
    """The quantity in nano-units, rounded up like Go's parser rounds below nano scale.

    Cached by value (quantities hash and compare by value): every allocate call converts its
    requests' amounts, and the same few amounts recur.
    """
    return math.ceil(q.as_fraction() * _NANO)


class Amount(NamedTuple):
    """A quantity together with its exact nano-unit value."""

    quantity: Quantity
    nanos: int

    @classmethod
    def of(cls, q: Quantity) -> Amount:
        return cls(q, nanos(q))


def request_key(requests: Mapping[str, Amount] | None) -> RequestKey:
    """The key under which a device keeps what requests of these amounts consume of it."""
    if not requests:
        return None
    return tuple(sorted((name, amount.nanos) for name, amount in requests.items()))


@dataclass(frozen=True)
class CapacityInfo:
    """One entry of a device's ``capacity`` map, pre-converted for fast arithmetic."""

    name: str
    value: Amount
    has_policy: bool
    default: Amount | None
    range_min: Amount | None
    range_max: Amount | None
    range_step: Amount | None
    has_range: bool
    valid_values: tuple[Amount, ...] | None

    @classmethod
    def of(cls, name: str, capacity: DeviceCapacity) -> CapacityInfo:
        policy = capacity.request_policy
        rng = policy.valid_range if policy else None
        return cls(
            name=name,
            value=Amount.of(capacity.value),
            has_policy=policy is not None,
            default=_amount(policy.default if policy else None),
            range_min=_amount(rng.min if rng else None),
            range_max=_amount(rng.max if rng else None),
            range_step=_amount(rng.step if rng else None),
            has_range=rng is not None,
            valid_values=(
                tuple(Amount.of(v) for v in policy.valid_values)
                if policy is not None and policy.valid_values is not None
                else None
            ),
        )

    def consumed(self, requested: Amount | None) -> Amount:
        """What one allocation consumes of this capacity (upstream calculateConsumedCapacity)."""
        if requested is None:
            return self.default if self.default is not None else self.value
        if not self.has_policy:
            return requested
        if self.has_range and self.range_min is not None:
            return self._round_up_range(requested, self.range_min)
        if self.valid_values is not None:
            return next((v for v in self.valid_values if requested.nanos <= v.nanos), requested)
        return requested

    def _round_up_range(self, requested: Amount, minimum: Amount) -> Amount:
        if requested.nanos < minimum.nanos:
            return minimum
        if self.range_step is None:
            return requested
        step = _whole_units(self.range_step)
        if step <= 0:
            # Validation forbids it; Go would divide by zero. Treat it as "no step".
            return requested
        base = _whole_units(minimum)
        # requested >= minimum, so ``added`` is never negative: round the step count up.
        added = _whole_units(requested) - base
        value = base + step * -(-added // step)
        return Amount(Quantity.from_int(value, Format.BINARY_SI), value * _NANO)

    def violates_policy(self, amount: Amount) -> bool:
        """Whether the amount breaks the request policy (upstream violatesPolicy)."""
        if not self.has_policy:
            return False
        if self.default is not None and amount.nanos == self.default.nanos:
            return False
        if self.has_range:
            if self.range_max is not None and amount.nanos > self.range_max.nanos:
                return True
            if self.range_step is not None:
                step = _whole_units(self.range_step)
                base = _whole_units(self.range_min) if self.range_min is not None else 0
                return step > 0 and (_whole_units(amount) - base) % step != 0
            return False
        if self.valid_values:
            return all(amount.nanos != v.nanos for v in self.valid_values)
        return False


def _amount(q: Quantity | None) -> Amount | None:
    return Amount.of(q) if q is not None else None


def _whole_units(a: Amount) -> int:
    """Go's ``Quantity.Value()``: the value rounded up to a whole number."""
    return -(-a.nanos // _NANO)


@dataclass(frozen=True)
class Consumption:
    """What a request would take from one device, before looking at what is in use already.

    ``missing`` means the request names a capacity the device lacks (the device is skipped);
    ``violates`` that a computed amount breaks the device's request policy.

    Everything here is computed in nano-units, so one Consumption serves every request with the
    same amounts (``request_key``) and is cached on the device (``DeviceInfo.consumption``). Only
    the quantities reported in a result depend on the request's own spelling: where the request's
    amount is used unchanged (``from_request``), ``consumed_capacity`` takes it from the request
    at hand, so ``10Gi`` and ``10737418240`` are each reported as written.
    """

    missing: bool
    violates: bool
    amounts: tuple[tuple[CapacityInfo, Amount], ...]
    # fits() with nothing in use yet, computed once.
    fits_alone: bool = False
    # Capacities whose consumed amount is the request's own amount.
    from_request: frozenset[str] = frozenset()
    # The consumed nano-units by capacity name (never modified: callers copy it).
    nanos_by_name: Mapping[str, int] = field(default_factory=dict)
    # Per capacity: name, consumed nano-units, the capacity's value in nano-units (for fits()).
    limits: tuple[tuple[str, int, int], ...] = ()

    @classmethod
    def of(cls, capacities: tuple[CapacityInfo, ...], requests: Mapping[str, Amount] | None) -> Consumption:
        if requests and any(all(c.name != name for c in capacities) for name in requests):
            return cls(missing=True, violates=False, amounts=())
        amounts = tuple((c, c.consumed(requests.get(c.name) if requests else None)) for c in capacities)
        violates = any(c.violates_policy(a) for c, a in amounts)
        fits_alone = not violates and all(a.nanos <= c.value.nanos for c, a in amounts)
        return cls(
            missing=False,
            violates=violates,
            amounts=amounts,
            fits_alone=fits_alone,
            from_request=frozenset(c.name for c, a in amounts if requests and a is requests.get(c.name)),
            nanos_by_name={c.name: a.nanos for c, a in amounts},
            limits=tuple((c.name, a.nanos, c.value.nanos) for c, a in amounts),
        )

    def fits(self, aggregated: Mapping[str, int] | None, in_flight: Mapping[str, int] | None) -> bool:
        """Whether every capacity still has room: already used + in flight + this <= value."""
        if self.missing or self.violates:
            return False
        for name, used, limit in self.limits:
            if aggregated:
                used += aggregated.get(name, 0)
            if in_flight:
                used += in_flight.get(name, 0)
            if used > limit:
                return False
        return True

    def consumed_capacity(self, requests: Mapping[str, Amount] | None) -> dict[str, Quantity]:
        """The result's ``consumedCapacity`` for ``requests`` (the amounts this was computed for):
        every capacity of the device, zero amounts included."""
        consumed = {cap.name: a.quantity for cap, a in self.amounts}
        if requests:
            for name in self.from_request:
                consumed[name] = requests[name].quantity
        return consumed
