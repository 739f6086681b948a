"""A thread pool whose threads end once idle, so that a burst does not leave its threads behind.

``concurrent.futures.ThreadPoolExecutor`` keeps every thread it starts until shutdown. The pool of
costly checks may start up to 258 (two computing, the rest waiting on the API server for the quota
ledger), and each burst left its high-water mark: in the 60-minute soak a replica stopped with
SIGSTOP and continued took every queued request at once and went from 23 threads to 28 for the rest
of the run, so its thread count only ever grew. Here a thread that finds no work for ``idle``
seconds ends; the next burst starts threads again (a few hundred microseconds each).

Work goes to the thread that went idle last, so that under steady traffic the threads a burst
added find none and end: handed out in turn, every thread found work every few milliseconds, and
the fourth soak's replica kept 37 threads from a burst in its 40th minute to the end.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

# How long a thread waits for work before it ends.
IDLE_SECONDS = 60.0

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


@dataclass(eq=False)
class _Hand:
    """An idle thread, waiting on ``wake`` for the work put in ``work`` (None: it is to end)."""

    wake: threading.Event = field(default_factory=threading.Event)
    work: _Work | None = None


class IdleEndingThreads(Executor):
    """At most ``max_workers`` threads, started as work arrives and ended after ``idle`` seconds
    without any.

    New work goes to the idle thread that went idle last (``_idle`` is a stack), or starts a
    thread (below the limit), or else waits in ``_queued`` for the next thread to finish; a thread
    that finishes takes queued work before it goes idle, so work never waits while a thread idles.
    All of it under one lock, so an idle thread's time running out and work being handed to it
    cannot cross: the thread ends only if no work was handed to it.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str, idle: float = IDLE_SECONDS) -> None:
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._idle_seconds = idle
        self._lock = threading.Lock()
        self._queued: deque[_Work] = deque()
        self._idle: list[_Hand] = []
        self._threads: set[threading.Thread] = set()
        self._numbers = itertools.count()
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        work = (future, fn, args, kwargs)
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._idle:
                hand = self._idle.pop()
                hand.work = work
                hand.wake.set()
            elif len(self._threads) < self._max:
                name = f"{self._prefix}_{next(self._numbers)}"
                # The work goes by the hand, which lets go of it: the thread keeps its arguments
                # until it ends, and work holds a request's context (its snapshot) while it lives.
                thread = threading.Thread(target=self._run, args=(_Hand(work=work),), name=name, daemon=True)
                self._threads.add(thread)
                thread.start()
            else:
                self._queued.append(work)
        return future

    def _run(self, hand: _Hand) -> None:
        work, hand.work = hand.work, None
        while work is not None:
            future, fn, args, kwargs = work
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as err:  # handed to the caller, as ThreadPoolExecutor does
                    future.set_exception(err)
            del work, future, fn, args, kwargs  # nothing of the work kept while idle
            work = self._next(hand)

    def _next(self, hand: _Hand) -> _Work | None:
        """The thread's next work: queued work, else what is handed to it while it waits idle;
        None when it is to end (idle too long, or shut down)."""
        with self._lock:
            if self._queued:
                return self._queued.popleft()
            waits = not self._shut
            if waits:
                hand.wake.clear()
                self._idle.append(hand)
        if waits:
            hand.wake.wait(self._idle_seconds)
        with self._lock:
            work, hand.work = hand.work, None
            if work is None:
                if hand in self._idle:
                    self._idle.remove(hand)
                self._threads.discard(threading.current_thread())
            return work

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new work; with ``cancel_futures`` the queued work is cancelled; every thread ends
        after the work it has and the work still queued (``wait``: this returns once they have)."""
        with self._lock:
            self._shut = True
            while cancel_futures and self._queued:
                self._queued.popleft()[0].cancel()
            while self._idle:
                self._idle.pop().wake.set()  # with no work: it ends
            running = list(self._threads)
        for thread in running if wait else ():
            thread.join()
