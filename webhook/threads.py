"""A thread pool whose threads end once idle, so that a burst does not leave its threads behind.

``concurrent.futures.ThreadPoolExecutor`` keeps every thread it starts until shutdown. The pool of
costly checks may start up to 258 (two computing, the rest waiting on the API server for the quota
ledger), and each burst left its high-water mark: in the 60-minute soak a replica stopped with
SIGSTOP and continued took every queued request at once and went from 23 threads to 28 for the rest
of the run, so its thread count only ever grew. Here a thread that finds no work for ``idle``
seconds ends; the next burst starts threads again (a few hundred microseconds each).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

# How long a thread waits for work before it ends.
IDLE_SECONDS = 60.0

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class IdleEndingThreads(Executor):
    """At most ``max_workers`` threads, started as work arrives and ended after ``idle`` seconds
    without any.

    Two counts, kept under one lock, make sure queued work always has a thread to take it: the
    threads not running work (``_idle``: waiting for it, or just started) and the work in the queue
    (``_queued``). New work starts a thread when it outnumbers the idle ones (below the limit);
    an idle thread ends only while the idle ones outnumber the queued work, so the ones left
    still cover it. (ThreadPoolExecutor counts idle threads with a semaphore that may count a
    thread twice; harmless when threads never end, a hang when the last one ends on a stale count.)
    """

    def __init__(self, max_workers: int, thread_name_prefix: str, idle: float = IDLE_SECONDS) -> None:
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._idle_seconds = idle
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._queued = 0
        self._numbers = itertools.count()
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._work.put((future, fn, args, kwargs))
            self._queued += 1
            if self._queued > self._idle and len(self._threads) < self._max:
                self._idle += 1
                name = f"{self._prefix}_{next(self._numbers)}"
                thread = threading.Thread(target=self._run, name=name, daemon=True)
                self._threads.add(thread)
                thread.start()
        return future

    def _run(self) -> None:
        while True:
            try:
                work = self._work.get(timeout=self._idle_seconds)
            except queue.Empty:
                if self._ended(surplus_only=True):
                    return
                continue
            if work is None:  # shutdown
                self._ended(surplus_only=False)
                return
            with self._lock:
                self._queued -= 1
                self._idle -= 1
            future, fn, args, kwargs = work
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as err:  # handed to the caller, as ThreadPoolExecutor does
                    future.set_exception(err)
            del work, future, fn, args, kwargs  # nothing of the work kept while idle
            with self._lock:
                self._idle += 1

    def _ended(self, surplus_only: bool) -> bool:
        """Count this idle thread out, if it may end: after a wait for work that timed out, only
        while the other idle threads still cover the queued work (some may have just arrived)."""
        with self._lock:
            if surplus_only and self._idle <= self._queued:
                return False
            self._idle -= 1
            self._threads.discard(threading.current_thread())
            return True

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new work; with ``cancel_futures`` the queued work is cancelled; every thread ends
        after the work it has (``wait``: this returns once they have)."""
        with self._lock:
            self._shut = True
            while cancel_futures:
                try:
                    work = self._work.get_nowait()
                except queue.Empty:
                    break
                if work is not None:
                    self._queued -= 1
                    work[0].cancel()
            running = list(self._threads)
            for _ in running:
                self._work.put(None)
        for thread in running if wait else ():
            thread.join()
