"""The pool of costly checks: threads started as work arrives, ended once idle (webhook/threads.py)."""

from __future__ import annotations

import random
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import wait

import pytest

from webhook.threads import IdleEndingThreads

PREFIX = "test-idle-ending"


def running() -> int:
    return sum(t.name.startswith(PREFIX) for t in threading.enumerate())


def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def test_a_burst_starts_threads_up_to_the_limit_and_they_end_once_idle() -> None:
    """The soak's replica kept the threads of its largest burst for the rest of the hour."""
    pool = IdleEndingThreads(3, PREFIX, idle=0.2)
    release = threading.Event()
    futures = [pool.submit(release.wait) for _ in range(5)]
    until(lambda: running() == 3)
    time.sleep(0.05)
    assert running() == 3  # the limit: two wait in the queue
    release.set()
    assert [f.result(timeout=5) for f in futures] == [True] * 5
    until(lambda: running() == 0)
    assert pool.submit(lambda: 42).result(timeout=5) == 42  # and start again for new work
    pool.shutdown()


def test_under_steady_traffic_the_threads_a_burst_added_end() -> None:
    """The fourth soak's replica kept its 40th minute's burst of threads to the end: work handed
    out in turn kept every thread from ever being idle for long. One request at a time needs one
    thread; the others end."""
    pool = IdleEndingThreads(8, PREFIX, idle=0.3)
    release = threading.Event()
    burst = [pool.submit(release.wait) for _ in range(6)]
    until(lambda: running() == 6)
    release.set()
    wait(burst, timeout=5)
    steady_until = time.monotonic() + 1.2
    while time.monotonic() < steady_until:  # a request every 20 ms, each done at once
        pool.submit(lambda: None).result(timeout=5)
        until(lambda: len(pool._idle) == running())  # the thread that served it is idle again
        time.sleep(0.02)
    assert running() == 1
    pool.shutdown()


def test_an_idle_thread_keeps_nothing_of_the_work_it_did() -> None:
    """Work holds a request's context, and through it a snapshot of the cluster."""

    class Context:
        pass

    pool = IdleEndingThreads(2, PREFIX)
    context = Context()
    gone = threading.Event()
    weakref.finalize(context, gone.set)
    pool.submit(lambda c: None, context).result(timeout=5)
    del context
    assert gone.wait(5) and running() == 1  # let go of, while its thread waits for more work
    pool.shutdown()


def test_results_and_errors_reach_the_caller() -> None:
    pool = IdleEndingThreads(2, PREFIX)
    assert pool.submit(lambda a, b=0: a + b, 2, b=3).result(timeout=5) == 5
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(timeout=5)
    pool.shutdown()
    assert running() == 0


def test_work_arriving_as_idle_threads_end_is_never_left_without_a_thread() -> None:
    """Threads end after 1 ms idle while work keeps arriving at random moments: each piece of work
    must still find a thread (a stale idle count would leave it queued with none)."""
    pool = IdleEndingThreads(4, PREFIX, idle=0.001)
    rng = random.Random(7)
    futures = []
    for _ in range(3000):
        futures.append(pool.submit(time.sleep, rng.choice((0, 0, 0.0005))))
        if rng.random() < 0.2:
            time.sleep(rng.choice((0.0005, 0.001, 0.002)))
    done, not_done = wait(futures, timeout=30)
    assert not not_done and len(done) == 3000
    pool.shutdown(wait=True)
    assert running() == 0


def test_shutdown_cancels_queued_work_and_refuses_more() -> None:
    pool = IdleEndingThreads(1, PREFIX)
    release = threading.Event()
    first = pool.submit(release.wait)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(lambda: None)
    release.set()
    assert first.result(timeout=5) is True
    until(lambda: running() == 0)
