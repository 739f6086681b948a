"""Leader election on a ``coordination.k8s.io/v1`` Lease, so one replica at a time writes certificates.

Every replica serves admission requests; only the holder of the Lease generates CAs, renews the
serving certificate and patches caBundles. Without this, three replicas would each mint their own
CA at start-up and fight over the Secret.

The protocol follows client-go's ``tools/leaderelection`` (leaderelection.go, resourcelock/
leaselock.go in kubernetes/kubernetes ``staging/src/k8s.io/client-go``):

* the Lease's ``resourceVersion`` is the lock: every write is a conditional update, and a
  409 Conflict means another replica wrote first, so we are not the leader this round;
* expiry is judged by *our* clock from the moment we last saw the record change, not by the
  holder's ``renewTime``, so clock skew between nodes cannot make two replicas leader at once;
* a leader that stops cleanly releases the Lease (empty holder, one-second duration) so a
  successor takes over at once instead of after a full lease duration.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from certs.kube import Kube, KubeApiError, namespaced

log = logging.getLogger(__name__)


def format_micro_time(moment: dt.datetime) -> str:
    """RFC 3339 with exactly six fractional digits, the wire form of ``metav1.MicroTime``.

    Written by hand because ``datetime.isoformat`` drops the fraction when it is zero, which the
    API server's MicroTime parser rejects.
    """
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseConfig:
    """Timing as in client-go's defaults: 15 s lease, renewed every 2 s."""

    namespace: str
    name: str
    identity: str
    lease_duration: dt.timedelta = dt.timedelta(seconds=15)
    retry_period: dt.timedelta = dt.timedelta(seconds=2)

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("identity must be set (the pod name, from the downward API POD_NAME)")
        if self.retry_period >= self.lease_duration:
            raise ValueError("retry_period must be shorter than lease_duration, or the lease lapses")


class LeaseElector:
    """Tries to acquire or renew one Lease; :meth:`try_acquire_or_renew` is one round."""

    def __init__(self, kube: Kube, config: LeaseConfig) -> None:
        self._kube = kube
        self._config = config
        self._collection = namespaced("coordination.k8s.io/v1", config.namespace, "leases")
        self._path = f"{self._collection}/{config.name}"
        self._observed: Mapping[str, Any] | None = None
        self._observed_at: dt.datetime | None = None

    @property
    def identity(self) -> str:
        return self._config.identity

    def try_acquire_or_renew(self, now: dt.datetime) -> bool:
        """One election round at ``now``; True when this replica holds the Lease afterwards."""
        current = self._get()
        if current is None:
            return self._create(now)
        spec = current.get("spec") or {}
        self._observe(spec, now)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(now):
            return False
        return self._update(current, now, renewing=holder == self.identity)

    def release(self, now: dt.datetime) -> None:
        """Give the Lease up if we hold it, so another replica need not wait for it to expire."""
        current = self._get()
        if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        spec = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
        spec["renewTime"] = format_micro_time(now)
        self._replace({**current, "spec": spec})

    def _observe(self, spec: Mapping[str, Any], now: dt.datetime) -> None:
        if spec != self._observed:
            self._observed, self._observed_at = dict(spec), now

    def _expired(self, now: dt.datetime) -> bool:
        assert self._observed is not None and self._observed_at is not None
        seconds = self._observed.get("leaseDurationSeconds") or 0
        return self._observed_at + dt.timedelta(seconds=seconds) <= now

    def _spec(self, now: dt.datetime, acquired: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self._config.lease_duration.total_seconds()),
            "acquireTime": acquired,
            "renewTime": format_micro_time(now),
            "leaseTransitions": transitions,
        }

    def _get(self) -> dict[str, Any] | None:
        return self._kube.get(self._path)

    def _create(self, now: dt.datetime) -> bool:
        spec = self._spec(now, format_micro_time(now), 0)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self._config.name, "namespace": self._config.namespace},
            "spec": spec,
        }
        try:
            self._kube.create(self._collection, body)
        except KubeApiError as err:
            if err.status == 409:  # another replica created it first
                return False
            raise
        log.info("acquired lease %s/%s as %s", self._config.namespace, self._config.name, self.identity)
        self._observed, self._observed_at = spec, now
        return True

    def _update(self, current: dict[str, Any], now: dt.datetime, renewing: bool) -> bool:
        old = current.get("spec") or {}
        transitions = int(old.get("leaseTransitions") or 0)
        if renewing:
            spec = self._spec(now, old.get("acquireTime") or format_micro_time(now), transitions)
        else:
            spec = self._spec(now, format_micro_time(now), transitions + 1)
        if not self._replace({**current, "spec": spec}):
            return False
        if not renewing:
            log.info("acquired lease %s/%s as %s", self._config.namespace, self._config.name, self.identity)
        self._observed, self._observed_at = spec, now
        return True

    def _replace(self, body: dict[str, Any]) -> bool:
        """Conditional update: ``body`` carries the resourceVersion we read; False on 409."""
        try:
            self._kube.replace(self._path, body)
        except KubeApiError as err:
            if err.status == 409:
                return False
            raise
        return True
