"""The dry run pauses Python's cyclic garbage collector, and always gives it back as it found it."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from policies.dryrun.request import UnanswerableError
from webhook import dryrun_api as api


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_on_again_after() -> None:
    pause = api.CollectorPause()
    with pause:
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_dry_runs_share_one_pause() -> None:
    pause = api.CollectorPause()
    pause.__enter__()
    pause.__enter__()
    pause.__exit__(None, None, None)
    assert not gc.isenabled(), "the second dry run is still running"
    pause.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    pause = api.CollectorPause()
    gc.disable()
    with pause:
        pass
    assert not gc.isenabled()


def test_the_answer_is_built_paused_and_a_refusal_resumes_the_collector(monkeypatch: Any) -> None:
    seen: list[bool] = []

    def unanswerable(*_: object, **__: object) -> None:
        seen.append(gc.isenabled())
        raise UnanswerableError("nodes: Not found: 'x'", ["nodes: Not found: 'x'"])

    monkeypatch.setattr(api, "answer_request", unanswerable)
    monkeypatch.setattr(api, "headroom_request", unanswerable)
    settings = api.DryRunSettings()
    deadlines = api.Deadlines(time.monotonic, settings.timeout, settings.node_timeout)
    for headroom in (False, True):  # a dry run, and a headroom's copies
        question = SimpleNamespace(headroom=headroom)
        with pytest.raises(api.Problem) as problem:
            api.encoded_answer(question, object(), settings, deadlines)  # type: ignore[arg-type]
        assert problem.value.status == 422
    assert seen == [False, False]
    assert gc.isenabled()
