"""With every draguard replica stopped, each of the chart's webhooks fails the way
``charts/draguard/README.md`` promises: its table of webhooks is read here, and for each row a
request that webhook intercepts is sent to the real API server. ``Fail`` webhooks refuse it,
``Ignore`` ones let it through (the API server counts that in
``apiserver_admission_webhook_fail_open_count``, as the README says); requests the chart's
matchConditions keep away from draguard (ordinary pods and namespaces) never wait for it.

Which webhook failed which way is read from the API server's own metrics, per webhook name: a pod
with claims goes to four webhooks at once, and the refusal a client sees names only one of them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, call, https_get
from deploy import Draguard, installed
from workloads import (
    claim,
    claims,
    create,
    eviction,
    pod,
    pods,
    resource_slice,
    slices,
)

README = Path(__file__).resolve().parents[2] / "charts" / "draguard" / "README.md"
ROW = re.compile(r"^\| `(?P<name>[a-z.]+\.draguard\.io)` \|.*\| (?P<policy>Fail|Ignore) \| [^|]+ \|$")
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"
# Every webhook the chart can render, the prescheduled mutating variant included.
VALUES = {"webhooks": {"prescheduled": {"mutating": {"enabled": True}}}}


def promised() -> dict[str, str]:
    """Webhook name -> failurePolicy, from the README's table of what the webhooks intercept."""
    rows = (ROW.match(line) for line in README.read_text().splitlines())
    return {m["name"]: m["policy"] for m in rows if m}


@pytest.fixture(scope="module")
def draguard(control_plane: ControlPlane) -> Iterator[Draguard]:
    with installed(control_plane, VALUES) as deployment:
        yield deployment


@contextlib.contextmanager
def stopped(draguard: Draguard) -> Iterator[None]:
    """Every replica down for the ``with`` block (the Service then has no endpoint), then back."""
    draguard.stop_replicas()
    try:
        yield
    finally:
        for i in range(len(draguard.replica)):
            draguard.start_replica(i)
        for i in range(len(draguard.replica)):
            draguard.wait_ready(i)


SAMPLE = re.compile(r"^(?P<metric>apiserver_admission_webhook_\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="([^"]*)"')


def webhook_counts(plane: ControlPlane, operation: str = "") -> dict[tuple[str, str, str], float]:
    """(metric, webhook name, type: validating|admit) -> the API server's count so far, summed over
    the other labels (of calls for ``operation`` only, if given). Read as the exposition text says
    it (prometheus_client's parser renames counters to end in ``_total``)."""
    status, text = https_get(plane.port, "/metrics", plane.ssl_context())
    assert status == 200, text
    counts: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        sample = SAMPLE.match(line)
        labels = dict(LABEL.findall(sample["labels"])) if sample else {}
        if operation and labels.get("operation") != operation:
            continue
        if sample and labels.get("name", "").endswith(".draguard.io"):
            key = (sample["metric"], labels["name"], labels["type"])
            counts[key] = counts.get(key, 0.0) + float(sample["value"])
    return counts


FAIL_OPEN = "apiserver_admission_webhook_fail_open_count"
REJECTED = "apiserver_admission_webhook_rejection_count"
CALLED = "apiserver_admission_webhook_request_total"


def test_readme_and_chart_agree_on_every_webhook(draguard: Draguard, control_plane: ControlPlane) -> None:
    """The table the next test checks against is the configuration the API server has."""
    promises = promised()
    assert len(promises) == 7, promises
    found = {}
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        answer = call(control_plane.client(), "GET", f"/apis/admissionregistration.k8s.io/v1/{kind}/draguard")
        assert answer.status == 200, answer.body
        found.update({(kind, w["name"]): w["failurePolicy"] for w in answer.body["webhooks"]})
    assert found == {
        **{("validatingwebhookconfigurations", n): p for n, p in promises.items()},
        ("mutatingwebhookconfigurations", "prescheduled.draguard.io"): promises["prescheduled.draguard.io"],
    }


def test_with_draguard_down_fail_webhooks_refuse_and_ignore_webhooks_admit(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    api = control_plane.client()
    ns = kube_namespace
    # Made while draguard answers: what the requests below need to exist.
    create(api, claims(ns), claim("held", "gpu.example.com"))
    create(api, pods(ns), pod("evictable"))
    before = webhook_counts(control_plane)

    with stopped(draguard):
        answers = {
            # selectors: a claim create goes to selectors only.
            "claim create": call(api, "POST", claims(ns), claim("new", "gpu.example.com")),
            # personas: a slice create goes to personas only.
            "slice create": call(api, "POST", slices(), resource_slice("down.example.com", "no-node")),
            # namespaces.personas: setting the admin-access label.
            "labelled namespace": call(
                api,
                "POST",
                "/api/v1/namespaces",
                {"metadata": {"name": f"{ns}-x", "labels": {ADMIN_ACCESS: ""}}},
            ),
            # prescheduled (both), sharing, quota: a pod with claims.
            "pod with claims": call(api, "POST", pods(ns), pod("worker", claims=["held"])),
            # sharing and quota: a claim status update.
            "claim status": call(api, "PATCH", f"{claims(ns)}/held/status", {}),
            # quota: a claim deletion (its charge is released).
            "claim delete": call(api, "DELETE", f"{claims(ns)}/held"),
            # drain: an eviction.
            "eviction": call(api, "POST", f"{pods(ns)}/evictable/eviction", eviction(ns, "evictable")),
        }
        after = webhook_counts(control_plane)

    refused = {what for what, a in answers.items() if a.status >= 400}
    assert refused == {
        "claim create",
        "slice create",
        "labelled namespace",
        "pod with claims",
        "claim status",
        "claim delete",
    }, {what: (a.status, a.message) for what, a in answers.items()}
    for what in refused:
        assert "failed calling webhook" in answers[what].message, answers[what].message
    assert answers["eviction"].status == 201
    assert call(api, "GET", f"{pods(ns)}/evictable").status == 404

    def delta(metric: str, name: str, kind: str = "validating") -> float:
        return after.get((metric, name, kind), 0.0) - before.get((metric, name, kind), 0.0)

    outcome = {}
    for name, policy in promised().items():
        kinds = ("validating", "admit") if name == "prescheduled.draguard.io" else ("validating",)
        for kind in kinds:
            called = delta(CALLED, name, kind)
            opened, rejected = delta(FAIL_OPEN, name, kind), delta(REJECTED, name, kind)
            assert called > 0, f"no request reached {name} ({kind})"
            outcome[(name, kind)] = (policy, "Ignore" if opened == called and not rejected else "Fail")
    assert all(promise == seen for promise, seen in outcome.values()), outcome


def test_ordinary_pods_and_namespaces_never_wait_for_draguard(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    """The matchConditions keep them in the API server: admitted with draguard down, and the pod
    webhooks (three of them Fail) are not even called. Creates are counted only: the session's
    other tests may still be tearing down (claims deleted with their namespace call the quota
    webhook meanwhile)."""
    api = control_plane.client()
    before = webhook_counts(control_plane, "CREATE")
    with stopped(draguard):
        plain = call(api, "POST", pods(kube_namespace), pod("plain"))
        namespace = call(api, "POST", "/api/v1/namespaces", {"metadata": {"name": f"{kube_namespace}-plain"}})
        after = webhook_counts(control_plane, "CREATE")
    call(api, "DELETE", f"/api/v1/namespaces/{kube_namespace}-plain")
    assert plain.status == 201, plain.body
    assert namespace.status == 201, namespace.body
    assert {k: v for k, v in after.items() if v != before.get(k, 0.0)} == {}
