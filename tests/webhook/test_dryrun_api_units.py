"""The dry-run endpoint's pieces without HTTP: flags, the rate limit, deadlines, the token cache."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from certs.material import generate_ca
from webhook import auth
from webhook import dryrun_api as api

NOW = dt.datetime(2026, 11, 22, 9, 0, tzinfo=dt.UTC)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    api.add_flags(parser)
    return parser.parse_args(argv)


def test_flags_default_to_the_settings_defaults() -> None:
    assert api.settings_from_args(parse(), demo=False) == api.DryRunSettings()
    assert api.settings_from_args(parse(), demo=True).demo is True


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--dryrun-timeout", "0"), "--dryrun-timeout: must be greater than 0, got 0.0"),
        (("--dryrun-burst", "-1"), "--dryrun-burst: must be greater than 0, got -1"),
        (("--dryrun-queue", "-1"), "--dryrun-queue: must be 0 or more, got -1"),
        (
            ("--dryrun-default-limit", "9", "--dryrun-max-nodes", "5"),
            "--dryrun-default-limit: must not exceed",
        ),
        (("--dryrun-features", "warp"), "--dryrun-features: "),
        (
            ("--dryrun-client-ca", "/nonexistent/ca.crt"),
            "--dryrun-client-ca /nonexistent/ca.crt: cannot read",
        ),
    ],
)
def test_unusable_flags_are_refused_naming_the_flag(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(api.SettingsError) as err:
        api.settings_from_args(parse(*argv), demo=False)
    assert str(err.value).startswith(message)


def test_a_client_ca_that_is_not_pem_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "ca.crt"
    path.write_text("not a certificate")
    with pytest.raises(api.SettingsError, match="not a PEM certificate bundle"):
        api.settings_from_args(parse("--dryrun-client-ca", str(path)), demo=False)
    path.write_bytes(generate_ca(NOW, dt.timedelta(days=1)).cert_pem)
    assert api.settings_from_args(parse("--dryrun-client-ca", str(path)), demo=False).client_ca_file == str(
        path
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_token_bucket_allows_bursts_then_the_rate_per_caller() -> None:
    clock = Clock()
    limiter = auth.RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.take("alice") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("alice") == pytest.approx(0.5)  # one token refills in 1/rate seconds
    assert limiter.take("bob") == 0.0
    clock.now += 0.5
    assert limiter.take("alice") == 0.0
    clock.now += 100
    assert [limiter.take("alice") for _ in range(4)][-1] > 0  # the bucket holds at most `burst`


def test_the_limiter_forgets_the_least_recent_callers_beyond_its_size() -> None:
    limiter = auth.RateLimiter(rate=1.0, burst=1, clock=Clock(), max_callers=2)
    for name in ("a", "b", "c"):
        limiter.take(name)
    assert limiter.take("a") == 0.0  # forgotten, so a full bucket again
    assert limiter.take("c") > 0


def test_deadlines_stop_the_search_at_the_node_or_the_total_limit_whichever_first() -> None:
    clock = Clock()
    deadlines = api.Deadlines(clock, total=10.0, per_node=3.0)
    budget = deadlines.budget(1000)
    assert budget.deadline == 3.0
    clock.now += 2
    deadlines.begin_node()
    clock.now += 2.5
    assert budget.clock is not None and budget.clock() == pytest.approx(2.5)  # the node's own time
    clock.now += 4  # 8.5 s in: 1.5 s left in total, less than the node's 3 s
    deadlines.begin_node()
    assert budget.clock() == pytest.approx(1.5)  # as if 1.5 s of the node's 3 s were gone
    assert not deadlines.over()
    clock.now += 1.5
    assert deadlines.over() and budget.clock() >= budget.deadline
    deadlines.cancel()
    assert budget.clock() == float("inf")


class FakeRequest:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


async def test_token_reviews_are_cached_by_digest_until_their_ttl() -> None:
    clock = Clock()
    seen: list[str] = []

    def reviewer(token: str) -> auth.Review:
        seen.append(token)
        ok = token == "good"
        return auth.Review(auth.Caller("alice", ("g",), "token") if ok else None, "" if ok else "nope")

    tokens = auth.BearerTokens(reviewer, clock)
    request: Any = FakeRequest({"Authorization": "Bearer good"})
    assert (await tokens.authenticate(request)) == auth.Caller("alice", ("g",), "token")
    await tokens.authenticate(request)
    assert seen == ["good"]
    clock.now += auth.ACCEPTED_TTL
    await tokens.authenticate(request)
    assert seen == ["good", "good"]
    bad: Any = FakeRequest({"Authorization": "Bearer bad"})
    for _ in range(2):
        with pytest.raises(auth.AuthError) as err:
            await tokens.authenticate(bad)
        assert (err.value.status, str(err.value)) == (401, "bearer token refused: nope")
    assert seen.count("bad") == 1
    assert "good" not in json.dumps(tokens._cache.keys())  # digests, never tokens


async def test_a_malformed_authorization_header_is_401_and_none_is_no_credential() -> None:
    tokens = auth.BearerTokens(lambda _: auth.Review(None, "unused"))
    with pytest.raises(auth.AuthError, match="expected 'Bearer <token>'"):
        await tokens.authenticate(FakeRequest({"Authorization": "Basic YWxpY2U="}))  # type: ignore[arg-type]
    assert await tokens.authenticate(FakeRequest({})) is None  # type: ignore[arg-type]


class FakeAuthRequest(FakeRequest):
    """What the chain reads of a request: the headers, the path and the method."""

    path = "/v1/dryrun"
    method = "POST"


async def test_access_reviews_ask_for_the_path_and_lower_case_method_and_are_cached() -> None:
    clock = Clock()
    asked: list[tuple[auth.Caller, str, str]] = []

    def reviewer(caller: auth.Caller, path: str, verb: str) -> auth.Decision:
        asked.append((caller, path, verb))
        return auth.Decision(caller.name == "alice", "" if caller.name == "alice" else "no binding")

    def token_reviewer(token: str) -> auth.Review:
        return auth.Review(auth.Caller(token, ("g",), "token", f"uid-{token}", (("scope", ("x",)),)))

    chain = auth.Chain([auth.BearerTokens(token_reviewer, clock)], auth.SubjectAccessReviews(reviewer, clock))
    alice: Any = FakeAuthRequest({"Authorization": "Bearer alice"})
    assert (await chain.authenticate(alice)).name == "alice"
    await chain.authenticate(alice)
    # a POST to a non-resource URL is the verb "post" (apiserver endpoints/request/requestinfo.go)
    assert asked == [
        (auth.Caller("alice", ("g",), "token", "uid-alice", (("scope", ("x",)),)), "/v1/dryrun", "post")
    ]
    clock.now += auth.ALLOWED_TTL
    await chain.authenticate(alice)
    assert len(asked) == 2
    mallory: Any = FakeAuthRequest({"Authorization": "Bearer mallory"})
    for _ in range(2):
        with pytest.raises(auth.AuthError) as err:
            await chain.authenticate(mallory)
        # kube-apiserver's wording for a refused non-resource request
        assert (err.value.status, str(err.value)) == (
            403,
            'User "mallory" cannot post path "/v1/dryrun": no binding',
        )
    assert len(asked) == 3  # the refusal is cached too
    clock.now += auth.DENIED_TTL
    with pytest.raises(auth.AuthError):
        await chain.authenticate(mallory)
    assert len(asked) == 4


async def test_an_access_review_that_cannot_be_made_is_503_and_not_cached() -> None:
    calls = 0

    def unreachable(caller: auth.Caller, path: str, verb: str) -> auth.Decision:
        nonlocal calls
        calls += 1
        raise auth.ReviewUnavailable("SubjectAccessReview create answered HTTP 403: Forbidden")

    certificate = auth.Caller("alice", (), "certificate")

    class Known:
        async def authenticate(self, request: Any) -> auth.Caller:
            return certificate

    chain = auth.Chain([Known()], auth.SubjectAccessReviews(unreachable))
    for _ in range(2):
        with pytest.raises(auth.AuthError) as err:
            await chain.authenticate(FakeAuthRequest({}))  # type: ignore[arg-type]
        assert err.value.status == 503
        assert str(err.value) == (
            "cannot authorize alice now: SubjectAccessReview create answered HTTP 403: Forbidden"
        )
    assert calls == 2


def test_a_claims_only_request_stands_for_one_pod_using_every_claim_and_template() -> None:
    body = {
        "claims": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "a"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
            }
        ],
        "claimTemplates": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t"},
                "spec": {"spec": {}},
            }
        ],
    }
    question = api.parse_question(json.dumps(body).encode(), api.DryRunSettings(), NOW)
    assert question.synthetic and question.pod.key == "default/dryrun"
    refs = [
        (r.name, r.resource_claim_name, r.resource_claim_template_name)
        for r in question.pod.spec.resource_claims or ()
    ]
    assert refs == [("a", "a", None), ("t", None, "t")]
    # kubectl's namespace for objects without one, and the API server's defaults applied
    assert question.claims[0].namespace == "default"
    exactly = (question.claims[0].spec.devices.requests or [])[0].exactly
    assert exactly is not None and exactly.allocation_mode == "ExactCount" and exactly.count == 1
    assert question.limit == api.DryRunSettings().default_limit
