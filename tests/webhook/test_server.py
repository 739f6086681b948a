"""The admission server in process: decisions, webhook-call errors vs object errors, deadlines,
metrics, logs and probes, with rules injected (the real ones are tested in tests/rules)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import re
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from policies.api.kinds import decode
from policies.config import Config
from policies.rules.drain import DrainRule
from policies.rules.engine import Context, Finding, Request
from policies.snapshot import Snapshot
from webhook import review, server
from webhook.logs import DECISIONS, DecisionLog
from webhook.manifests import load
from webhook.metrics import Metrics
from webhook.server import Admission, build_app, readiness, split_rules

Client = Callable[..., Awaitable[TestClient]]


@dataclass
class FakeRule:
    """A rule whose findings the test chooses; named after a real rule so it has a config section."""

    name: str
    findings: Sequence[Finding] = ()
    mutating: bool = False
    sleep: float = 0.0
    error: Exception | None = None
    # Costly by default, so that the deadline tests exercise the thread pool.
    slow: bool = True
    # Says it waits on the API server (as the quota rule before its ledger write) before sleeping.
    waits_on_api: bool = False
    seen: list[tuple[Request, Context]] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)

    def applies(self, request: Request, ctx: Context) -> bool:
        return True

    def costly(self, request: Request, ctx: Context) -> bool:
        return self.slow

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        self.seen.append((request, ctx))
        self.threads.append(threading.current_thread().name)
        if self.waits_on_api:
            ctx.waiting_on_api()
        time.sleep(self.sleep)
        if self.error is not None:
            raise self.error
        return self.findings


@dataclass
class FakeState:
    snapshot: Snapshot = field(default_factory=Snapshot)
    synced: bool = True
    seconds: float = 0.0

    def age(self) -> float:
        return self.seconds


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "inference", "namespace": "team-a"},
        "spec": {"containers": [{"name": "c", "image": "x"}], **spec},
    }


@contextmanager
def level(value: int) -> Iterator[None]:
    """The decision logger's level for a while, as the logging configuration would set it."""
    before = DECISIONS.level
    DECISIONS.setLevel(value)
    try:
        yield
    finally:
        DECISIONS.setLevel(before)


def admission_review(obj: Any = None, uid: str = "uid-1", **request: Any) -> dict[str, Any]:
    body = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a",
        "name": "inference",
        "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["team-a"]},
        "object": pod() if obj is None else obj,
        **request,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


CREATED: list[Admission] = []


@pytest.fixture(autouse=True)
def no_thread_outlives_its_test() -> Iterator[None]:
    """The admissions' thread pools (and CEL worker processes) stop with their test, as serve stops
    them with the server: a worker left running would count as another test's thread
    (tests/webhook/test_state_watch.py)."""
    yield
    for admission in CREATED:
        for executor in (admission.executor, admission.decoder):
            executor.shutdown(wait=True, cancel_futures=True)
        admission.cel.close()
    CREATED.clear()


def make_admission(rules: Sequence[Any] = (), state: FakeState | None = None, **options: Any) -> Admission:
    state = state or FakeState()
    config = options.pop("config", Config())
    admission = Admission(split_rules(rules), config, state, Metrics(state), **options)
    CREATED.append(admission)
    return admission


async def client_for(aiohttp_client: Client, admission: Admission) -> TestClient:
    return await aiohttp_client(build_app(admission, readiness(admission.state, None)))


async def until(condition: Callable[[], object], timeout: float = 5.0) -> None:
    """Wait on the loop for ``condition`` (what a fixed sleep would only hope for), failing after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def post(client: TestClient, body: Any, path: str = "/validate") -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(path, data=data, headers={"Content-Type": "application/json"})
    text = await response.text()
    return response.status, json.loads(text) if text.startswith("{") else text


async def test_allowed_review_echoes_uid_and_kind(aiohttp_client: Client) -> None:
    client = await client_for(aiohttp_client, make_admission())
    status, body = await post(client, admission_review(uid="abc-123"))
    assert status == 200
    assert body == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "abc-123", "allowed": True},
    }


async def test_denial_carries_status_message_and_other_rules_warnings(aiohttp_client: Client) -> None:
    rules = [
        FakeRule("prescheduled", [Finding("deny", "pod sets spec.nodeName; use a node selector")]),
        FakeRule("selectors", [Finding("warn", "selector matches no device")]),
    ]
    client = await client_for(aiohttp_client, make_admission(rules))
    status, body = await post(client, admission_review())
    response = body["response"]
    assert status == 200
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["message"] == "pod sets spec.nodeName; use a node selector"
    assert response["warnings"] == ["selector matches no device"]


async def test_mutate_answers_a_base64_json_patch_and_validate_does_not_run_mutating_rules(
    aiohttp_client: Client,
) -> None:
    patch = ({"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": "node-1"}},)
    rewrite = FakeRule("prescheduled", [Finding("warn", "rewrote spec.nodeName", patch)], mutating=True)
    client = await client_for(aiohttp_client, make_admission([rewrite]))
    _, validated = await post(client, admission_review(), "/validate")
    assert validated["response"] == {"uid": "uid-1", "allowed": True}
    _, mutated = await post(client, admission_review(), "/mutate")
    response = mutated["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == list(patch)
    assert response["warnings"] == ["rewrote spec.nodeName"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "body is not JSON"),
        (b"[1, 2]", "body is not a JSON object"),
        ({**admission_review(), "apiVersion": "admission.k8s.io/v1beta1"}, "admissionReviewVersions: [v1]"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request: Required value"),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": "pod"},
            "request: Invalid value: 'pod': must be an object",
        ),
        ({**admission_review(), "request": {**admission_review()["request"], "uid": ""}}, "request.uid"),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"operation": "CREATE"},
            },
            "request.uid: Required value",
        ),
        (
            {**admission_review(), "request": {**admission_review()["request"], "kind": "Pod"}},
            "request.kind: Invalid value: 'Pod': must be an object",
        ),
        (
            {**admission_review(), "request": {**admission_review()["request"], "operation": "PATCH"}},
            "request.operation: Invalid value: 'PATCH'",
        ),
    ],
)
async def test_webhook_call_errors_are_http_400_naming_the_field(
    aiohttp_client: Client, body: Any, reason: str
) -> None:
    client = await client_for(aiohttp_client, make_admission())
    status, answer = await post(client, body)
    assert status == 400
    assert reason in answer["error"]
    status, _ = await post(client, admission_review())
    assert status == 200  # and the server keeps serving


async def test_an_object_nested_past_the_fast_parsers_limit_is_decided(aiohttp_client: Client) -> None:
    # pydantic-core's JSON parser stops at 255 levels; Go's, and so the API server's, at 10,000.
    deep: Any = "leaf"
    for _ in range(400):
        deep = {"nested": deep}
    rule = FakeRule("selectors", [Finding("deny", "no")])
    client = await client_for(aiohttp_client, make_admission([rule]))
    status, body = await post(client, admission_review(pod(volumes=[{"name": "v", "csi": deep}])))
    assert status == 200 and body["response"]["allowed"] is False
    assert len(rule.seen) == 1


async def test_a_body_its_content_encoding_does_not_decode_is_a_400_naming_it(aiohttp_client: Client) -> None:
    client = await client_for(aiohttp_client, make_admission())
    response = await client.post("/validate", data=b"{}", headers={"Content-Encoding": "gzip"})
    assert response.status == 400
    assert "body cannot be read (Content-Encoding 'gzip')" in (await response.json())["error"]
    status, _ = await post(client, admission_review())
    assert status == 200


async def test_bodies_over_3_mib_are_413(aiohttp_client: Client) -> None:
    client = await client_for(aiohttp_client, make_admission())
    big = admission_review(pod(padding="x" * review.MAX_BODY_BYTES))
    status, _ = await post(client, big)
    assert status == 413
    status, _ = await post(client, admission_review())
    assert status == 200


async def test_lone_surrogates_reach_the_rules_as_u_fffd_as_the_api_server_stores_them(
    aiohttp_client: Client,
) -> None:
    # The issue-16 cases: in a quantity the model refused it with an encoding error (400, "could not
    # process"); in the user name the decision was made and lost to the log line.
    rule = FakeRule("selectors", [Finding("deny", "no")])
    out = io.StringIO()
    client = await client_for(aiohttp_client, make_admission([rule], decisions=DecisionLog(out)))
    broken = pod(containers=[{"name": "c", "image": "x", "resources": {"requests": {"cpu": "SURROGATE"}}}])
    raw = json.dumps(admission_review(broken)).replace("SURROGATE", "1\\ud800").encode()
    status, body = await post(client, raw)
    assert status == 200 and body["response"]["status"]["code"] == 422
    assert "object.spec.containers[0].resources.requests.cpu" in body["response"]["status"]["message"]
    raw = json.dumps(admission_review(userInfo={"username": "SURROGATE"})).replace("SURROGATE", "\\udfff")
    with level(logging.INFO):
        status, body = await post(client, raw.encode())
    assert status == 200 and body["response"]["allowed"] is False
    (seen, _) = rule.seen[0]
    assert seen.user.username == "\ufffd"
    assert json.loads(out.getvalue().splitlines()[-1])["user"] == "\ufffd"


async def test_a_body_nested_too_deeply_is_a_400_naming_it(aiohttp_client: Client) -> None:
    client = await client_for(aiohttp_client, make_admission())
    status, answer = await post(client, b"[" * 5000 + b"]" * 5000)
    assert (
        status == 400 and answer["error"] == "body is nested deeper than 512 levels, the most draguard reads"
    )


@pytest.mark.parametrize(
    ("obj", "fields"),
    [
        (pod(resourceClaims="gpu"), ["object.spec.resourceClaims: Invalid value: 'gpu': must be a list"]),
        (
            pod(resourceClaims=[{"name": 7}], nodeName=["n"]),
            ["object.spec.resourceClaims[0].name", "object.spec.nodeName"],
        ),
        (
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}},
            ["object: Invalid value: 'resource.k8s.io/v1 ResourceClaim': the request is for v1 Pod"],
        ),
        ("a string", ["object: Invalid value: 'a string': must be an object"]),
    ],
)
async def test_an_undecodable_object_is_denied_naming_the_field(
    aiohttp_client: Client, obj: Any, fields: list[str]
) -> None:
    rule = FakeRule("selectors")
    client = await client_for(aiohttp_client, make_admission([rule]))
    status, body = await post(client, admission_review(obj))
    response = body["response"]
    assert status == 200
    assert response["uid"] == "uid-1" and response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["message"].startswith("draguard cannot read this Pod: ")
    for expected in fields:
        assert expected in response["status"]["message"]
    assert rule.seen == []


async def test_rules_see_decoded_objects_and_unmodelled_kinds_raw(aiohttp_client: Client) -> None:
    rule = FakeRule("drain")
    client = await client_for(aiohttp_client, make_admission([rule]))
    await post(client, admission_review(pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}])))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "driver-0"}}
    evicting = {"kind": {"group": "policy", "version": "v1", "kind": "Eviction"}, "subResource": "eviction"}
    await post(client, admission_review(eviction, uid="uid-2", dryRun=True, **evicting))
    (created, _), (evicted, _) = rule.seen
    assert created.obj is not None and created.obj.kind == "Pod"
    assert created.user.username == "alice" and created.namespace == "team-a"
    assert evicted.obj is None and evicted.raw == eviction
    assert evicted.sub_resource == "eviction" and evicted.dry_run
    # The resource's group and version, not the Eviction's (policy/v1): rules match on the resource.
    assert (evicted.group, evicted.version, evicted.resource) == ("", "v1", "pods")


async def test_an_eviction_as_the_api_server_sends_it_reaches_the_drain_rule(aiohttp_client: Client) -> None:
    """The API server sends a policy/v1 Eviction for the pods/eviction subresource; the drain rule
    must see it behind the webhook exactly as the policy test CLI shows it."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "gpu-cluster"
    driver = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plugin-node-1", "namespace": "gpu-driver", "labels": {"app": "gpu-driver"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "plugin"}]},
    }
    # The pod that examples/gpu-cluster's running-job claim is reserved for.
    trainer = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer-0",
            "namespace": "team-a",
            "uid": "6f1c1f38-5d47-4c1e-9a0e-2d6f7c1d9b01",
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "main"}]},
    }
    objects = [x.obj for x in load([str(examples)])] + [decode(driver), decode(trainer)]
    state = FakeState(snapshot=Snapshot.build(objects))
    config = Config.model_validate(
        {"rules": {"drain": {"driverPodSelector": {"matchLabels": {"app": "gpu-driver"}}}}}
    )
    client = await client_for(aiohttp_client, make_admission([DrainRule()], state=state, config=config))
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "plugin-node-1", "namespace": "gpu-driver"},
    }
    review_fields = {
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "subResource": "eviction",
        "namespace": "gpu-driver",
        "name": "plugin-node-1",
    }
    status, body = await post(client, admission_review(eviction, **review_fields))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert "must not be evicted yet" in body["response"]["status"]["message"]


async def test_a_rule_path_asks_only_its_rule_and_the_catch_all_asks_all(aiohttp_client: Client) -> None:
    selectors, sharing = FakeRule("selectors", [Finding("deny", "no")]), FakeRule("sharing")
    rewrite = FakeRule("prescheduled", mutating=True)
    client = await client_for(aiohttp_client, make_admission([selectors, sharing, rewrite]))
    _, body = await post(client, admission_review(), path="/validate/sharing")
    assert body["response"]["allowed"] is True
    assert (len(selectors.seen), len(sharing.seen), len(rewrite.seen)) == (0, 1, 0)
    _, body = await post(client, admission_review(), path="/validate")
    assert body["response"]["allowed"] is False
    assert (len(selectors.seen), len(sharing.seen), len(rewrite.seen)) == (1, 2, 0)
    await post(client, admission_review(), path="/mutate/prescheduled")
    assert len(rewrite.seen) == 1
    response = await client.post("/validate/nosuch", data=b"{}")
    assert response.status == 404


async def test_cheap_checks_run_on_the_loop_and_costly_ones_in_the_pool(aiohttp_client: Client) -> None:
    cheap, costly = FakeRule("selectors", slow=False), FakeRule("prescheduled", slow=True)
    client = await client_for(aiohttp_client, make_admission([cheap]))
    await post(client, admission_review())
    client = await client_for(aiohttp_client, make_admission([cheap, costly]))
    await post(client, admission_review())
    loop = threading.current_thread().name
    # Alone, the cheap rule runs inline; beside a costly one, the request goes to the pool whole.
    assert cheap.threads[0] == loop
    assert cheap.threads[1].startswith("draguard-decide") and costly.threads[0].startswith("draguard-decide")


async def test_deadline_answers_per_failure_policy_and_the_loop_keeps_serving(aiohttp_client: Client) -> None:
    config = Config.model_validate(
        {"rules": {"selectors": {"failurePolicy": "Fail"}, "prescheduled": {"failurePolicy": "Ignore"}}}
    )
    slow = [FakeRule("selectors", sleep=0.6), FakeRule("prescheduled", sleep=0.6)]
    admission = make_admission(slow, config=config, deadline=0.2)
    client = await client_for(aiohttp_client, admission)
    started = time.perf_counter()
    decision = asyncio.ensure_future(post(client, admission_review()))
    await until(lambda: any(r.seen for r in slow))  # a rule is deciding: the request is in flight
    health = await client.get("/healthz")
    assert health.status == 200 and time.perf_counter() - started < 0.2
    assert "draguard_admission_in_flight 1.0" in admission.metrics.render().decode()
    status, body = await decision
    assert "draguard_admission_in_flight 0.0" in admission.metrics.render().decode()
    assert time.perf_counter() - started < 0.5
    response = body["response"]
    assert status == 200 and response["allowed"] is False
    assert (
        "could not check rule selectors: no answer within the 0.2s deadline" in response["status"]["message"]
    )
    [warning] = response["warnings"]
    assert re.fullmatch(
        r"draguard could not check rule prescheduled: no answer within the 0.2s deadline: "
        r"\d+\.\d\ds waiting for its turn, then \d+\.\d\ds checking",
        warning,
    ), warning


async def test_an_answer_past_the_deadline_says_how_long_it_waited_on_the_api_server(
    aiohttp_client: Client,
) -> None:
    """Whether draguard or the API server was slow (issue 30: ledger writes under a burst)."""
    config = Config.model_validate({"rules": {"quota": {"failurePolicy": "Fail"}}})
    rule = FakeRule("quota", sleep=0.6, waits_on_api=True)
    admission = make_admission([rule], config=config, deadline=0.3)
    client = await client_for(aiohttp_client, admission)
    _, body = await post(client, admission_review())
    message = body["response"]["status"]["message"]
    waited = re.fullmatch(
        r"draguard could not check rule quota: no answer within the 0.3s deadline: (\d+\.\d\d)s waiting "
        r"for its turn, (\d+\.\d\d)s checking, then (\d+\.\d\d)s waiting on the API server",
        message,
    )
    assert waited is not None, message
    assert float(waited[3]) > float(waited[1]) + float(waited[2])  # it waited on the API server at once


async def test_each_webhook_path_answers_by_its_own_deadline(aiohttp_client: Client) -> None:
    """Each webhook of the chart has its own timeoutSeconds, so each path its own deadline: the
    quota rule, writing through the API server, may take longer than the others (issue 30)."""
    rules = [FakeRule("selectors", sleep=0.5), FakeRule("quota", sleep=0.5)]
    config = Config.model_validate({"rules": {"selectors": {"failurePolicy": "Fail"}}})
    admission = make_admission(rules, config=config, deadline=0.2, deadlines={"validate/quota": 2.0})
    client = await client_for(aiohttp_client, admission)
    (_, short), (_, long) = await asyncio.gather(
        post(client, admission_review(), "/validate/selectors"),
        post(client, admission_review(), "/validate/quota"),
    )
    assert "no answer within the 0.2s deadline" in short["response"]["status"]["message"]
    assert long["response"] == {"uid": long["response"]["uid"], "allowed": True}
    assert len(rules[1].seen) == 1


async def test_a_stale_snapshot_reaches_the_rules_as_not_fresh(aiohttp_client: Client) -> None:
    rule = FakeRule("selectors")
    state = FakeState(seconds=301.0)
    client = await client_for(aiohttp_client, make_admission([rule], state))
    await post(client, admission_review())
    state.seconds = 299.0
    await post(client, admission_review())
    assert [ctx.snapshot_fresh for _, ctx in rule.seen] == [False, True]


async def test_a_failing_rule_is_answered_per_its_policy_not_with_500(aiohttp_client: Client) -> None:
    rule = FakeRule("selectors", error=RuntimeError("boom"))
    client = await client_for(aiohttp_client, make_admission([rule]))
    status, body = await post(client, admission_review())
    assert status == 200
    assert body["response"]["allowed"] is True  # selectors' default failurePolicy is Ignore
    assert "internal error: RuntimeError: boom" in body["response"]["warnings"][0]


async def test_a_bug_in_the_server_is_a_400_not_a_500(
    aiohttp_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(uid: str, decision: Any) -> Any:
        raise KeyError("bug")

    monkeypatch.setattr(review, "answer", broken)
    client = await client_for(aiohttp_client, make_admission())
    status, body = await post(client, admission_review())
    assert status == 400
    assert body["error"] == "draguard could not process the review: KeyError"


async def test_metrics_count_requests_findings_and_snapshot(aiohttp_client: Client) -> None:
    rules = [
        FakeRule("prescheduled", [Finding("deny", "no")]),
        FakeRule("selectors", [Finding("warn", "hm")]),
    ]
    admission = make_admission(rules)
    client = await client_for(aiohttp_client, admission)
    await post(client, admission_review())
    odd = admission_review(uid="u2", kind={"group": "x", "version": "v1", "kind": "Widget"})
    await post(client, odd)
    await post(client, b"junk")
    text = admission.metrics.render().decode()
    requests = "draguard_admission_requests_total"
    assert f'{requests}{{decision="denied",kind="Pod",operation="CREATE",webhook="validate"}} 1.0' in text
    assert 'decision="denied",kind="other",operation="CREATE"' in text
    assert f'{requests}{{decision="invalid",kind="other",operation="other",webhook="validate"}} 1.0' in text
    assert 'draguard_rule_findings_total{action="deny",mode="enforce",rule="prescheduled"} 2.0' in text
    assert 'draguard_rule_findings_total{action="warn",mode="enforce",rule="selectors"} 2.0' in text
    assert "draguard_admission_in_flight 0.0" in text
    assert "draguard_admission_duration_seconds_count{" in text
    assert 'draguard_snapshot_objects{kind="Node"} 0.0' in text
    assert "draguard_snapshot_age_seconds 0.0" in text


async def test_one_json_log_line_per_decision_without_the_object(aiohttp_client: Client) -> None:
    secret = "hunter2-password"
    obj = pod(containers=[{"name": "c", "image": "x", "env": [{"name": "PW", "value": secret}]}])
    out = io.StringIO()
    rules = [FakeRule("selectors", [Finding("warn", "w")])]
    client = await client_for(aiohttp_client, make_admission(rules, decisions=DecisionLog(out)))
    with level(logging.INFO):
        await post(client, admission_review(obj, uid="log-uid"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert secret not in lines[0]
    assert (line["level"], line["logger"]) == ("info", "draguard.admission")
    assert {k: line[k] for k in ("uid", "kind", "namespace", "name", "user", "decision", "operation")} == {
        "uid": "log-uid",
        "kind": "Pod",
        "namespace": "team-a",
        "name": "inference",
        "user": "alice",
        "decision": "allowed",
        "operation": "CREATE",
    }
    assert line["rules"] == [{"rule": "selectors", "mode": "enforce", "action": "warn", "message": "w"}]
    assert line["latency_ms"] > 0


async def test_decision_lines_follow_the_configured_level(aiohttp_client: Client) -> None:
    out = io.StringIO()
    rules = [FakeRule("selectors", [Finding("deny", "no")])]
    client = await client_for(aiohttp_client, make_admission(rules, decisions=DecisionLog(out)))
    with level(logging.WARNING):
        await post(client, admission_review(pod(), uid="denied"))  # a denial is a warning: written
    with level(logging.ERROR):
        await post(client, admission_review(pod(), uid="quiet"))
    assert [json.loads(line)["uid"] for line in out.getvalue().splitlines()] == ["denied"]
    assert json.loads(out.getvalue())["level"] == "warning"


class BrokenPipe(io.StringIO):
    """The stderr of a process whose log shipper died."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


async def test_an_unwritable_log_loses_the_line_not_the_decision(aiohttp_client: Client) -> None:
    rules = [FakeRule("selectors", [Finding("deny", "no")])]
    client = await client_for(aiohttp_client, make_admission(rules, decisions=DecisionLog(BrokenPipe())))
    status, body = await post(client, admission_review(pod()))
    assert status == 200 and body["response"]["allowed"] is False


async def test_readyz_waits_for_the_state_and_healthz_does_not(aiohttp_client: Client) -> None:
    state = FakeState(synced=False)
    client = await client_for(aiohttp_client, make_admission(state=state))
    assert (await client.get("/healthz")).status == 200
    not_ready = await client.get("/readyz")
    assert not_ready.status == 503
    assert "cluster state not synced yet" in await not_ready.text()
    state.synced = True
    assert (await client.get("/readyz")).status == 200


async def test_readyz_says_a_stale_state_and_stays_ready(aiohttp_client: Client) -> None:
    """Past snapshot.maxAgeSeconds the replica still answers (the rules that need the state per their
    failure policy); leaving the Service would hand every rule to the webhooks' failurePolicy."""
    state = FakeState(synced=True)
    client = await aiohttp_client(build_app(make_admission(state=state), readiness(state, None, 30)))
    assert await (await client.get("/readyz")).text() == "ok"
    state.seconds = 42
    stale = await client.get("/readyz")
    assert stale.status == 200
    assert await stale.text() == (
        "ok\nstale: the cluster state was last confirmed 42s ago (snapshot.maxAgeSeconds 30): "
        "the rules that need it answer per their failurePolicy"
    )


def test_default_deadline_is_below_every_timeout_the_chart_configures() -> None:
    values = yaml.safe_load((Path(__file__).resolve().parents[2] / "charts/draguard/values.yaml").read_text())
    hooks = values["webhooks"]
    timeouts = [h["timeoutSeconds"] for h in hooks.values() if isinstance(h, dict) and "timeoutSeconds" in h]
    timeouts.append(hooks["prescheduled"]["mutating"]["timeoutSeconds"])
    assert len(timeouts) >= 7
    assert min(timeouts) > server.DEFAULT_DEADLINE


async def raw_exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` on a new plain connection; the head of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return head


VALIDATE = b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: "


@pytest.mark.parametrize(
    "request_head",
    [
        b"POST /nosuch HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",  # 404, body unread
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
        VALIDATE + b"9999999\r\n\r\n",  # 413
    ],
)
async def test_an_answer_that_leaves_the_body_unread_closes_the_connection(
    aiohttp_server: Callable[..., Awaitable[Any]], request_head: bytes
) -> None:
    # aiohttp reads the rest of the body after the answer and closes the connection when it
    # cannot: a keep-alive answer would have the client's next request on it lost.
    admission = make_admission()
    server = await aiohttp_server(build_app(admission, readiness(admission.state, None)))
    head = await raw_exchange(server.port, request_head + b"{")
    assert b"Connection: close" in head, head
    complete = json.dumps(admission_review()).encode()
    head = await raw_exchange(server.port, b"%s%d\r\n\r\n%s" % (VALIDATE, len(complete), complete))
    assert head.startswith(b"HTTP/1.1 200") and b"Connection: close" not in head


def test_the_probe_and_metrics_ports_close_after_unread_bodies_too() -> None:
    for app in (
        server.build_health_app(server.Readiness(lambda: [])),
        server.build_metrics_app(make_admission().metrics),
    ):
        assert server.close_unless_read in app.middlewares


async def test_a_costly_check_past_its_deadline_is_told_to_stop(aiohttp_client: Client) -> None:
    rule = FakeRule("selectors", sleep=0.4)
    client = await client_for(aiohttp_client, make_admission([rule], deadline=0.1))
    status, body = await post(client, admission_review())
    assert status == 200 and "no answer within the 0.1s deadline" in body["response"]["warnings"][0]
    (_, ctx) = rule.seen[0]
    assert ctx.cancelled()  # the thread sees it between steps and gives up (see the selectors rule)


async def test_costly_checks_wait_for_their_turn_and_are_decided_in_arrival_order(
    aiohttp_client: Client,
) -> None:
    """A burst bigger than the threads is queued within the deadline, not refused (issue 30)."""
    rule = FakeRule("quota", sleep=0.2)
    client = await client_for(aiohttp_client, make_admission([rule], costly_turns=1))
    sent = []
    for i in range(4):
        sent.append(asyncio.ensure_future(post(client, admission_review(uid=f"r{i}"))))
        await asyncio.sleep(0.02)  # in this order
    answers = await asyncio.gather(*sent)
    assert [(status, body["response"]["allowed"]) for status, body in answers] == [(200, True)] * 4
    assert all("warnings" not in body["response"] for _, body in answers)
    assert [request.uid for request, _ in rule.seen] == ["r0", "r1", "r2", "r3"]


async def test_a_check_whose_turn_would_come_too_late_is_answered_per_failure_policy_saying_why(
    aiohttp_client: Client,
) -> None:
    rule = FakeRule("quota", sleep=0.6)  # quota's failurePolicy: Fail
    admission = make_admission([rule], costly_turns=1, deadline=1.0)
    client = await client_for(aiohttp_client, admission)
    status, body = await post(client, admission_review(uid="first"))  # such a check takes 0.6 s
    assert status == 200 and body["response"]["allowed"] is True
    assert admission.costly.need("validate: CREATE pods") == pytest.approx(0.6, abs=0.15)
    assert admission.costly.need("validate: UPDATE resourceclaims/status") == 0  # each kind its own
    running = asyncio.ensure_future(post(client, admission_review(uid="running")))
    await until(lambda: len(rule.seen) == 2)  # "running" holds the one turn
    started = time.perf_counter()
    status, body = await post(client, admission_review(uid="late"))
    # it waited while a turn could still leave it 0.6 s (0.4 s), not until the deadline
    assert time.perf_counter() - started < 0.55
    message = body["response"]["status"]["message"]
    assert status == 200 and body["response"]["allowed"] is False
    busy = r"draguard could not check rule quota: draguard is busy: waited 0\.[34]\ds "
    assert re.match(busy, message), message
    assert "for one of its 1 costly-check turns (0 still ahead)" in message
    assert "such a check has lately taken 0.6" in message and "due within 1s" in message
    assert (await running)[1]["response"]["allowed"] is True
    assert [request.uid for request, _ in rule.seen] == ["first", "running"]


async def test_a_check_waiting_on_the_api_server_hands_its_turn_on(aiohttp_client: Client) -> None:
    """The quota ledger's writes wait together instead of one after the other on the one turn."""
    rule = FakeRule("quota", sleep=0.5, waits_on_api=True)
    admission = make_admission([rule], costly_turns=1)
    client = await client_for(aiohttp_client, admission)
    started = time.perf_counter()
    answers = await asyncio.gather(*(post(client, admission_review(uid=f"w{i}")) for i in range(3)))
    assert time.perf_counter() - started < 1.0  # three times 0.5 s, side by side
    assert [body["response"]["allowed"] for _, body in answers] == [True] * 3
    assert len(set(rule.threads)) == 3
    # what such a check needs of a turn leaves out its wait: a slow API server does not make the
    # next one look hopeless (refused at once, though its turn takes milliseconds)
    assert admission.costly.need("validate: CREATE pods") < 0.2


@dataclass
class Charging(FakeRule):
    """Registers an undo of what it did (as the quota rule's ledger charge), recorded when run."""

    undone: list[str] = field(default_factory=list)

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        ctx.answer.unless_admitted(lambda: self.undone.append(request.uid))
        return super().check(request, ctx)


@pytest.mark.parametrize(
    ("rule", "allowed", "undone"),
    [
        (Charging("quota"), True, []),
        (Charging("quota", findings=[Finding("deny", "over quota")]), False, ["r"]),
        (Charging("quota", sleep=0.5), False, ["r"]),  # the deadline answered while it worked
    ],
)
async def test_what_a_rule_did_for_an_answer_that_did_not_admit_is_undone(
    aiohttp_client: Client, rule: Charging, allowed: bool, undone: list[str]
) -> None:
    client = await client_for(aiohttp_client, make_admission([rule], deadline=0.3))
    status, body = await post(client, admission_review(uid="r"))
    assert status == 200 and body["response"]["allowed"] is allowed
    await until(lambda: rule.seen)
    await until(lambda: len(rule.threads) == 1 and rule.undone == undone)


async def test_a_caller_gone_while_waiting_leaves_its_turn_to_the_next() -> None:
    line = server.Line(ThreadPoolExecutor(2), turns=1, threads=2)
    release = threading.Event()
    first = await line.run("k", 5.0, lambda _: release.wait())
    waiting = asyncio.ensure_future(line.run("k", 5.0, lambda _: "second"))
    third = asyncio.ensure_future(line.run("k", 5.0, lambda _: "third"))
    await until(lambda: len(line._waiting) == 2)  # both in line behind the first
    waiting.cancel()
    release.set()
    assert await first is True
    assert await (await third) == "third"
    assert waiting.cancelled()
    line.executor.shutdown()


def large_review(uid: str) -> bytes:
    padded = pod()
    padded["metadata"]["annotations"] = {"pad": "x" * server.LARGE_BODY}
    return json.dumps(admission_review(padded, uid=uid)).encode()


async def test_large_bodies_are_decoded_off_the_loop_and_shed_with_429_past_the_backlog(
    aiohttp_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded_on: list[str] = []
    to_request = review.to_request

    def slow(request: Any) -> Any:
        decoded_on.append(threading.current_thread().name)
        time.sleep(0.3)
        return to_request(request)

    monkeypatch.setattr(review, "to_request", slow)
    admission = make_admission()
    client = await client_for(aiohttp_client, admission)
    large = [asyncio.ensure_future(post(client, large_review(f"large-{i}"))) for i in range(2)]
    await until(admission.large.full)  # one large body is being decoded, the other waits for the thread
    status, body = await post(client, large_review("third"))
    assert status == 429 and body["error"].startswith("draguard is busy: 2 bodies over 262144 bytes")
    answers = await asyncio.gather(*large)
    assert [status for status, _ in answers] == [200, 200]
    status, _ = await post(client, admission_review())  # small: decoded on the loop
    assert status == 200
    assert decoded_on[:2] == ["draguard-decode_0"] * 2 and decoded_on[2] == threading.current_thread().name


async def test_the_deadline_counts_from_arrival_and_a_late_decode_is_429(
    aiohttp_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    to_request = review.to_request

    def slow(request: Any) -> Any:
        time.sleep(1.5)
        return to_request(request)

    monkeypatch.setattr(review, "to_request", slow)
    client = await client_for(aiohttp_client, make_admission(deadline=0.2))
    started = time.perf_counter()
    status, body = await post(client, large_review("late"))
    assert time.perf_counter() - started < 1.2  # not after the decode
    assert (
        status == 429
        and body["error"] == "draguard is busy: the review was not decoded within the 0.2s deadline"
    )


async def test_probes_on_the_side_loop_answer_while_the_main_loop_is_blocked() -> None:
    side = server.SideLoop()
    try:
        runner, port = await side.call(
            server._start(server.build_health_app(server.Readiness(lambda: [])), "127.0.0.1", 0, None)
        )
        answered: list[float] = []

        def probe() -> None:
            started = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
                assert response.status == 200
            answered.append(time.perf_counter() - started)

        prober = threading.Thread(target=probe)
        prober.start()
        prober.join(5.0)  # the main loop is blocked until the probe is answered: no callback of it runs
        assert answered and answered[0] < 1.5
        await side.call(runner.cleanup())
    finally:
        side.close()


class FixedLag(server.LoopLag):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def recent(self) -> float:
        return self.seconds


async def test_a_lagging_loop_sets_the_deadline_earlier_by_its_lag(aiohttp_client: Client) -> None:
    """With the loop running its timers 0.6 s late, a 1 s deadline's timer is set for 0.4 s, so
    that the answer still goes out by 1 s; the ledger's write is to end before that too."""
    rule = FakeRule("selectors", sleep=1.5)
    admission = make_admission([rule], deadline=1.0, lag=FixedLag(0.6))
    client = await client_for(aiohttp_client, admission)
    asked = time.monotonic()
    status, body = await post(client, admission_review())
    answered = time.monotonic() - asked
    assert status == 200 and "no answer within the 1s deadline" in body["response"]["warnings"][0]
    assert 0.4 <= answered < 1.0
    (_, ctx) = rule.seen[0]
    assert ctx.deadline is not None
    assert abs(ctx.deadline - asked - (0.4 - server.EFFECTS_MARGIN)) < 0.05  # 0.75 without the lag


async def test_the_loop_lag_is_how_late_the_loop_ran_its_timers_lately() -> None:
    lag = server.LoopLag()
    watch = asyncio.create_task(lag.watch())
    await until(lambda: lag._samples)  # one timer measured
    assert lag.recent() < 0.1
    time.sleep(0.3)  # the loop blocked, as by a long pass of the garbage collector
    await until(lambda: lag.recent() >= 0.2)
    watch.cancel()


def test_the_loop_lag_is_a_metric() -> None:
    admission = make_admission(lag=FixedLag(0.6))
    assert "draguard_event_loop_lag_seconds 0.6" in admission.metrics.render().decode()
