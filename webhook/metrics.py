"""Prometheus metrics, on their own registry (the chart's dashboard and alerts use these names).

Labels stay bounded whoever calls the webhook: ``operation`` and ``kind`` take values from fixed
sets (anything else is ``other``), never from free text, so a misbehaving client cannot create
series without end. The snapshot gauges are read from the current state at scrape time.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from certs.reloader import CertReloader
from policies.api.kinds import KNOWN_KINDS
from policies.availability import Availability, Counts, Tally
from policies.cel import stats as cel_stats
from policies.rules.engine import Outcome
from policies.snapshot import Snapshot
from webhook.state import State

OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
# Kinds the chart's webhooks send besides the modelled ones (an Eviction for the drain rule).
KINDS = frozenset({*KNOWN_KINDS, "Eviction"})
# Admission answers take milliseconds; the tail up to the API server's 5 s timeout is what alerts watch.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LABELS = ("webhook", "operation", "kind", "decision")


def bounded(value: str, allowed: frozenset[str]) -> str:
    return value if value in allowed else "other"


def object_counts(snapshot: Snapshot) -> dict[str, int]:
    """How many objects of each kind the snapshot holds."""
    return {
        "DeviceClass": len(snapshot.classes),
        "ResourceSlice": len(snapshot.slices),
        "ResourceClaim": len(snapshot.claims),
        "ResourceClaimTemplate": len(snapshot.templates),
        "Pod": len(snapshot.pods),
        "Node": len(snapshot.nodes),
        "Namespace": len(snapshot.namespaces),
        "ResourceQuota": len(snapshot.quotas),
        "DeviceTaintRule": len(snapshot.taint_rules),
        "PriorityClass": len(snapshot.priority_classes),
    }


class SnapshotCollector(Collector):
    """``draguard_snapshot_age_seconds`` and ``draguard_snapshot_objects{kind}`` from the live state."""

    def __init__(self, state: State) -> None:
        self._state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "draguard_snapshot_age_seconds",
            "Seconds since the cluster state was last known to be current (+Inf before the first sync).",
            value=self._state.age(),
        )
        snapshot = self._state.snapshot
        objects = GaugeMetricFamily(
            "draguard_snapshot_objects", "Objects in the snapshot the rules read, by kind.", labels=["kind"]
        )
        counts = object_counts(snapshot)
        for kind, count in counts.items():
            objects.add_metric([kind], count)
        yield objects


DEVICE_STATES = ("allocated", "available", "unavailable")


class DeviceCollector(Collector):
    """``draguard_pool_devices{driver,pool,state}`` and ``draguard_class_devices{class,state}``: the
    devices of each complete pool and each DeviceClass, allocated, available or unavailable
    (KEP-5677's counts, :mod:`policies.availability`). Counted on a scrape from the live snapshot by
    a :class:`Tally` that keeps what it counted, so a scrape costs what changed since the last one;
    the same snapshot is counted once."""

    def __init__(self, state: State) -> None:
        self._state = state
        self._tally = Tally()
        self._lock = threading.Lock()
        self._counted: tuple[Snapshot, Availability] | None = None

    def availability(self) -> Availability:
        snapshot = self._state.snapshot
        with self._lock:
            if self._counted is None or self._counted[0] is not snapshot:
                self._counted = (snapshot, self._tally.of(snapshot))
            return self._counted[1]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        found = self.availability()
        pools = GaugeMetricFamily(
            "draguard_pool_devices",
            "Devices of each complete resource pool by state: allocated to claims, available, or "
            "unavailable (not allocated, tainted NoSchedule or NoExecute).",
            labels=["driver", "pool", "state"],
        )
        for pool in found.pools:
            if pool.counts is not None:
                for state, count in zip(DEVICE_STATES, _by_state(pool.counts), strict=True):
                    pools.add_metric([pool.driver, pool.pool, state], count)
        yield pools
        classes = GaugeMetricFamily(
            "draguard_class_devices",
            "Devices a DeviceClass's selectors admit, over the complete pools, by state.",
            labels=["class", "state"],
        )
        for device_class in found.classes:
            for state, count in zip(DEVICE_STATES, _by_state(device_class.counts), strict=True):
                classes.add_metric([device_class.name, state], count)
        yield classes


def _by_state(counts: Counts) -> tuple[int, int, int]:
    return counts.allocated, counts.available, counts.unavailable


class CelCacheCollector(Collector):
    """``draguard_cel_cache_hit_ratio{cache}`` since start, and the lookups behind it as counters
    (``draguard_cel_cache_lookups_total{cache,result}``, for rates over a window)."""

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        ratio = GaugeMetricFamily(
            "draguard_cel_cache_hit_ratio",
            "Share of CEL cache lookups answered from the cache since start: compiled programs "
            "(compile) and selector results per device (result).",
            labels=["cache"],
        )
        lookups = CounterMetricFamily(
            "draguard_cel_cache_lookups", "CEL cache lookups by cache and result.", labels=["cache", "result"]
        )
        for cache, stats in (("compile", cel_stats.COMPILE), ("result", cel_stats.RESULTS)):
            total = stats.hits + stats.misses
            ratio.add_metric([cache], stats.hits / total if total else math.nan)
            lookups.add_metric([cache, "hit"], stats.hits)
            lookups.add_metric([cache, "miss"], stats.misses)
        yield ratio
        yield lookups


class CertificateCollector(Collector):
    """``draguard_cert_expiry_timestamp_seconds``: when the served certificate
    expires (no sample while none is served), for an alert days before a renewal that did not
    happen turns into a webhook every API server call fails on."""

    def __init__(self, tls: CertReloader) -> None:
        self._tls = tls

    def collect(self) -> Iterator[GaugeMetricFamily]:
        expiry = GaugeMetricFamily(
            "draguard_cert_expiry_timestamp_seconds",
            "Unix time at which the serving certificate in use expires (notAfter).",
        )
        served = self._tls.served
        if served is not None:
            expiry.add_metric([], served.not_after.timestamp())
        yield expiry


class Metrics:
    """The webhook's instruments; ``render()`` is the body of ``GET /metrics``."""

    def __init__(self, state: State, tls: CertReloader | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "draguard_admission_requests_total",
            "Admission requests answered, by webhook path, operation, kind and decision.",
            LABELS,
            registry=self.registry,
        )
        self.duration = Histogram(
            "draguard_admission_duration_seconds",
            "Time from receiving an admission request to answering it.",
            LABELS,
            buckets=BUCKETS,
            registry=self.registry,
        )
        # Counted in a plain int that only the event loop changes, and read at scrape time: the
        # gauge's own inc() and dec() would take a lock twice on every request.
        self.in_flight = 0
        Gauge(
            "draguard_admission_in_flight", "Admission requests being processed.", registry=self.registry
        ).set_function(lambda: self.in_flight)
        # How late the server's event loop runs its timers (server.LoopLag), read at scrape time: set
        # by the Admission that owns the loop; a rising value is overload, before answers are late.
        self.loop_lag: Callable[[], float] = lambda: 0.0
        Gauge(
            "draguard_event_loop_lag_seconds",
            "How late the event loop ran its timers, at most, over the last 5 s; deadlines end that early.",
            registry=self.registry,
        ).set_function(lambda: self.loop_lag())
        self.findings = Counter(
            "draguard_rule_findings_total",
            "Rule outcomes by rule, mode and action (deny, warn, audit, error).",
            ("rule", "mode", "action"),
            registry=self.registry,
        )
        self.registry.register(SnapshotCollector(state))
        self.registry.register(DeviceCollector(state))
        self.registry.register(CelCacheCollector())
        if tls is not None:
            self.registry.register(CertificateCollector(tls))
        # The request counter and histogram of each label set, looked up once: labels() checks and
        # converts every value and takes a lock, which costs more than the observation itself.
        self._series: dict[tuple[str, str, str, str], tuple[Counter, Histogram]] = {}

    def observe(self, webhook: str, operation: str, kind: str, decision: str, seconds: float) -> None:
        labels = (webhook, bounded(operation, OPERATIONS), bounded(kind, KINDS), decision)
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = (self.requests.labels(*labels), self.duration.labels(*labels))
        series[0].inc()
        series[1].observe(seconds)

    def outcomes(self, outcomes: tuple[Outcome, ...]) -> None:
        for outcome in outcomes:
            self.findings.labels(outcome.rule, outcome.mode, outcome.action).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
