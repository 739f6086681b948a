"""Long CEL expressions compiled in a worker process, so that their CPU does not hold up the server.

Compiling a selector (draguard's parser, type checker and cost estimator, all Python) takes about
4 ms per KiB of source: a claim of 64 selectors of 10 KiB, each compiled for the API server's
environment and the scheduler's, is 5 s of CPU. On one of the server's threads that CPU is taken
from the event loop a switch interval at a time (the GIL), so every request in flight, and the
deadline's own answer, waits its turn: issue 16's fuzz saw such claims answered after 6-11 s
against the 4 s deadline, and cheap reviews queued behind them. In a worker process the work
runs on another core, and the thread that asked waits on a pipe without the GIL.

Short expressions, almost every real selector, compile where they are asked for: handing them
over would cost more than compiling them. Programs come back to the asking process's compile
cache, so an expression crosses the pipe once.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from policies.cel import Environment, Program, compile_expression
from policies.cel.checker import Checked
from policies.cel.cost import Estimate
from policies.cel.program import front_end

log = logging.getLogger(__name__)

# Expressions at least this long (characters) are compiled in the worker: about 4 ms of CPU, ten
# times what the hand-off costs (pickling both ways, two pipe writes).
OFFLOAD_CHARS = 1024
# After this many failures in a row (the worker cannot start: no /dev/shm, or a main module the
# spawned process cannot import) long expressions are compiled in the server for good.
MAX_FAILURES = 3
# A checked expression is a tree up to cel-go's nesting limit deep; pickling it recurses a few
# frames per level, past the interpreter's default limit of 1,000 for the deepest ones.
WORKER_RECURSION_LIMIT = 20_000


def _worker_init() -> None:
    sys.setrecursionlimit(WORKER_RECURSION_LIMIT)


class CelWorker:
    """A process compiling long CEL expressions for the server's threads; started on first use.

    One process: the server's event loop has the other core. A worker that dies (killed, out of
    memory) is replaced on the next long expression; the expression that was being compiled is
    compiled in the asking thread instead, so the request still gets its answer. After
    ``MAX_FAILURES`` failures in a row no worker is started again: it cannot start here, and each
    attempt would cost a process start and a traceback in the log.
    """

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._failures = 0

    def compile(self, expression: str, env: Environment) -> Program:
        """:func:`policies.cel.compile_expression`, with the front end of a long expression run in
        the worker (the rules' ``Context.compile``)."""
        return compile_expression(expression, env, self._front_end)

    def _front_end(self, expression: str, env: Environment) -> tuple[Checked, Estimate]:
        if len(expression) < OFFLOAD_CHARS or self._failures >= MAX_FAILURES:
            return front_end(expression, env)
        pool = None
        try:
            pool = self._started()
            checked = pool.submit(front_end, expression, env).result()
        except (BrokenProcessPool, OSError) as err:  # died, or could not start (no /dev/shm...)
            with self._lock:
                self._failures += 1
                if self._pool is pool:
                    self._pool = None
            later = "for good" if self._failures >= MAX_FAILURES else "until it is replaced"
            log.warning("the CEL worker process is unavailable (%s); compiling in the server %s", err, later)
            return front_end(expression, env)
        self._failures = 0
        return checked

    def _started(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn: the server has threads, which a fork would copy mid-flight (their locks).
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(1, mp_context=context, initializer=_worker_init)
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
