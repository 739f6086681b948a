"""The one body decoder of every path: what it reads as the API server's Go decoder would, and the
4xx reason for everything else."""

from __future__ import annotations

import gzip
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
from aiohttp import StreamReader, web
from aiohttp.http_exceptions import ContentEncodingError
from aiohttp.test_utils import TestClient, make_mocked_request
from aiohttp.web_protocol import RequestPayloadError

from policies.config import Config
from policies.rules.registry import RULES
from webhook import bodies
from webhook.dryrun_api import DryRunSettings, add_dryrun_routes
from webhook.metrics import Metrics
from webhook.server import Admission, build_app, readiness, split_rules
from webhook.state import FileState

Client = Callable[..., Awaitable[TestClient]]


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b'{"a": "x"}', {"a": "x"}),
        # A lone surrogate escape is U+FFFD, one per escape; a valid pair is its character.
        (rb'"\ud800"', "\ufffd"),
        (rb'"1Ki\udfff"', "1Ki\ufffd"),
        (rb'"\ud800\ud800"', "\ufffd\ufffd"),
        (rb'"\ud83d\ude00 \ud83d"', "\U0001f600 \ufffd"),
        (rb'"\uDC00x"', "\ufffdx"),
        # An escaped backslash before "ud800" is the text \ud800, not an escape.
        (rb'"\\ud800"', "\\ud800"),
        # Invalid UTF-8: one U+FFFD per byte, as Go writes them (Python's "replace" would write one
        # for the two bytes of the truncated sequence).
        (b'"\xe2\x82x"', "\ufffd\ufffdx"),
        (b'"\xed\xa0\x80"', "\ufffd\ufffd\ufffd"),  # a surrogate written as UTF-8
        (b'{"user": "\xff"}', {"user": "\ufffd"}),
    ],
)
def test_json_is_read_as_the_api_servers_decoder_reads_it(raw: bytes, value: Any) -> None:
    assert bodies.parse(raw) == value


def test_json_deeper_than_the_fast_parsers_255_levels_is_read_up_to_512() -> None:
    parsed = bodies.parse(b"[" * 512 + b'"[[[\\ud800"' + b"]" * 512)
    for _ in range(512):
        (parsed,) = parsed
    assert parsed == "[[[\ufffd"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "body is not JSON: key must be a string at line 1 column 2"),
        (b'{"a": NaN}', "body is not JSON: expected value at line 1 column 7"),
        (b'{"a": -Infinity}', "body is not JSON: invalid number at line 1 column 8"),
        (b"[" * 300 + b"NaN" + b"]" * 300, "body is not JSON: NaN is not a JSON value"),
        (b'\xef\xbb\xbf{"a": 1}', "body is not JSON: expected value at line 1 column 1"),
        (b"", "body is not JSON: EOF while parsing a value at line 1 column 0"),
        (b'"\xff" x', "body is not JSON: trailing characters at line 1 column 7"),
        (b"[" * 300 + b"]" * 299, "body is not JSON: Expecting ',' delimiter: line 1 column 600"),
        (
            b"[" * 1_000_000 + b"]" * 1_000_000,
            "body is nested deeper than 512 levels, the most draguard reads",
        ),
        (b'{"a": ' * 513 + b"1" + b"}" * 513, "body is nested deeper than 512 levels"),
        (b"[" * 513 + b'"[]"' + b"]" * 513, "body is nested deeper than 512 levels"),
    ],
)
def test_what_is_not_json_is_a_400_naming_why(raw: bytes, reason: str) -> None:
    with pytest.raises(bodies.BadBody) as refused:
        bodies.parse(raw)
    assert refused.value.status == 400
    assert str(refused.value).startswith(reason), str(refused.value)


@pytest.mark.parametrize("raw", [b"[1]", b'"review"', b"null", b"3"])
def test_an_object_is_wanted(raw: bytes) -> None:
    with pytest.raises(bodies.BadBody, match="body is not a JSON object: expected a question"):
        bodies.parse_object(raw, "a question")


async def reader(aiohttp_client: Client, limit: int) -> TestClient:
    async def echo(request: web.Request) -> web.Response:
        try:
            return web.Response(body=await bodies.read(request, limit))
        except bodies.BadBody as err:
            return web.Response(status=err.status, text=str(err))

    app = web.Application()
    app.router.add_post("/", echo)
    return await aiohttp_client(app)


async def test_bodies_are_read_decoded_and_capped_after_decoding(aiohttp_client: Client) -> None:
    client = await reader(aiohttp_client, 1024)
    answered = await client.post("/", data=gzip.compress(b"x" * 1000), headers={"Content-Encoding": "gzip"})
    assert answered.status == 200 and await answered.read() == b"x" * 1000
    bomb = gzip.compress(b" " * (1 << 20))
    refused = await client.post("/", data=bomb, headers={"Content-Encoding": "gzip"})
    assert refused.status == 413 and await refused.text() == "body is larger than 1024 bytes"
    announced = await client.post("/", data=b"x" * 2048)
    assert announced.status == 413


async def test_a_body_its_encoding_does_not_decode_is_a_400_naming_the_encoding() -> None:
    # What aiohttp's payload reader raises when a gzip or deflate stream breaks mid-body (a broken
    # body that arrives whole is refused by aiohttp's parser before any handler runs).
    broken = RequestPayloadError("Can not decode content-encoding: deflate")
    broken.__cause__ = ContentEncodingError("Can not decode content-encoding: deflate")
    payload = mock.Mock(spec=StreamReader)
    payload.read.side_effect = broken
    request = make_mocked_request("POST", "/", headers={"Content-Encoding": "deflate"}, payload=payload)
    with pytest.raises(bodies.BadBody) as refused:
        await bodies.read(request, 1024)
    assert refused.value.status == 400
    assert str(refused.value) == (
        "body cannot be read (Content-Encoding 'deflate'): Can not decode content-encoding: deflate"
    )


async def test_a_body_cut_off_by_the_client_going_away_is_a_400_not_a_bug() -> None:
    """What aiohttp's payload raises when the connection is lost mid-body (kube-apiserver killed while
    sending a review, in benchmarks/soak.py): it was logged as "failed to process an admission
    review" with a traceback, as a bug of draguard's."""
    payload = mock.Mock(spec=StreamReader)
    payload.read.side_effect = [b"x" * 10, ConnectionResetError("Connection lost")]
    request = make_mocked_request("POST", "/", payload=payload)
    with pytest.raises(bodies.BadBody) as refused:
        await bodies.read(request, 1024)
    assert refused.value.status == 400
    assert str(refused.value) == "body was cut off after 10 bytes: the client closed the connection"


# --- every path reads its body through the decoder --------------------------------------------------


async def every_path(aiohttp_client: Client) -> TestClient:
    """The HTTPS app as serve builds it: the admission paths and the dry run, here over plain HTTP."""
    state = FileState.from_objects([], datetime.now(UTC))
    admission = Admission(split_rules(RULES), Config(), state, Metrics(state))
    app = build_app(admission, readiness(state, None))
    add_dryrun_routes(app, lambda: state.snapshot, DryRunSettings(demo=True, rate=1000, burst=1000))
    return await aiohttp_client(app)


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("raw", "headers", "admission", "dryrun"),
    [
        (
            DEEP,
            {},
            (400, "body is nested deeper than 512"),
            (400, "body: Invalid value: nested deeper than 200"),  # what the dry run can write again
        ),
        (
            b'{"pod": NaN}',
            {},
            (400, "body is not JSON: expected value"),
            (400, "body: Invalid value: not JSON: "),
        ),
        (b"[{}]", {}, (400, "body is not a JSON object"), (400, "body: Invalid value: must be a JSON")),
        (
            b"x" * (4 << 20),
            {},
            (413, "body is larger than 3145728 bytes"),
            (413, "request body is larger than 1048576 bytes (--dryrun-max-body)"),
        ),
        (
            gzip.compress(b" " * (8 << 20)),
            {"Content-Encoding": "gzip"},
            (413, "body is larger than 3145728 bytes"),
            (413, "request body is larger than 1048576 bytes"),
        ),
    ],
)
async def test_every_path_refuses_hostile_bodies_with_a_4xx_naming_why(
    aiohttp_client: Client,
    raw: bytes,
    headers: dict[str, str],
    admission: tuple[int, str],
    dryrun: tuple[int, str],
) -> None:
    client = await every_path(aiohttp_client)
    for path, (status, reason) in (("/validate", admission), ("/v1/dryrun", dryrun)):
        answered = await client.post(path, data=raw, headers={"Content-Type": "application/json", **headers})
        answer = await answered.json()
        assert answered.status == status, (path, answer)
        assert reason in (answer.get("problems") or [answer["error"]])[0], (path, answer)


async def test_a_lone_surrogate_in_a_dry_run_is_an_invalid_name(aiohttp_client: Client) -> None:
    client = await every_path(aiohttp_client)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "SURROGATE"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
    raw = json.dumps({"claims": [claim]}).replace("SURROGATE", "a\\udc00").encode()
    answered = await client.post("/v1/dryrun", data=raw, headers={"Content-Type": "application/json"})
    answer = await answered.json()
    assert answered.status == 422, answer
    problem = 'claims[0]: metadata.name: Invalid value: "a\ufffd": a lowercase RFC 1123'
    assert answer["problems"][0].startswith(problem), answer
