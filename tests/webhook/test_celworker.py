"""Long CEL expressions compiled in a worker process (issue 16): the same programs and errors as
compiling in the server, the server's own process free meanwhile, and a worker that dies replaced."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator

import pytest

from policies.api.resource import Device
from policies.cel import CompileError, Environment, Program, bind_device, compile_expression
from policies.cel.program import front_end
from policies.rules.selectors import STORED_EXPRESSIONS
from policies.validation.cel import NEW_EXPRESSIONS
from webhook.celworker import MAX_FAILURES, OFFLOAD_CHARS, CelWorker

ATTR = 'device.attributes["gpu.example.com"]'


def long_selector(offset: int) -> str:
    """An or-chain over OFFLOAD_CHARS characters, different for every ``offset`` (never cached)."""
    terms = 2 + OFFLOAD_CHARS // len(f"{ATTR}.index == 0 || ")
    return " || ".join(f"{ATTR}.index == {offset + i}" for i in range(terms))


@pytest.fixture
def worker() -> Iterator[CelWorker]:
    made = CelWorker()
    yield made
    made.close()


def children() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.is_alive()]


def test_a_long_expression_is_compiled_in_another_process_into_the_same_program(worker: CelWorker) -> None:
    before = children()
    expression = long_selector(9_000_001)
    program = worker.compile(expression, STORED_EXPRESSIONS)
    started = [p for p in children() if p not in before]
    assert len(started) == 1 and started[0].pid != os.getpid()
    inline = Program(expression, STORED_EXPRESSIONS, *front_end(expression, STORED_EXPRESSIONS))
    assert program.estimated_cost == inline.estimated_cost > 0
    assert program.checked.output == inline.checked.output
    device = Device.model_validate({"name": "gpu-0", "attributes": {"index": {"int": 9_000_003}}})
    binding = bind_device("gpu.example.com", device)
    assert program.matches(binding) is inline.matches(binding) is True
    # Compiled once: the program is in this process's cache now, and comes from there.
    assert compile_expression(expression, STORED_EXPRESSIONS) is program


def test_a_short_expression_is_compiled_where_it_is_asked_for(worker: CelWorker) -> None:
    before = children()
    program = worker.compile(f'{ATTR}.model == "w-{os.getpid()}"', STORED_EXPRESSIONS)
    assert program.estimated_cost > 0
    assert children() == before


@pytest.mark.parametrize("env", [NEW_EXPRESSIONS, STORED_EXPRESSIONS], ids=["new", "stored"])
def test_a_compile_error_from_the_worker_keeps_its_position(worker: CelWorker, env: Environment) -> None:
    broken = long_selector(9_100_000) + " || " + f"{ATTR}.model == )"
    with pytest.raises(CompileError) as inline:
        front_end(broken, env)
    with pytest.raises(CompileError) as offloaded:
        worker.compile(broken, env)
    assert (offloaded.value.message, offloaded.value.column, offloaded.value.line) == (
        inline.value.message,
        inline.value.column,
        inline.value.line,
    )
    assert offloaded.value.column is not None and offloaded.value.column > OFFLOAD_CHARS


def test_when_the_worker_dies_the_expression_is_still_compiled(worker: CelWorker) -> None:
    worker.compile(long_selector(9_200_000), STORED_EXPRESSIONS)
    (first,) = children()
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    first.join(5)
    program = worker.compile(long_selector(9_300_000), STORED_EXPRESSIONS)  # compiled in this process
    assert program.estimated_cost > 0
    worker.compile(long_selector(9_400_000), STORED_EXPRESSIONS)
    (second,) = children()
    assert second.pid != first.pid


def test_without_a_worker_process_long_expressions_are_compiled_in_the_server(
    worker: CelWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container without /dev/shm cannot start one (multiprocessing's locks live there)."""

    def no_semaphores(*args: object, **kwargs: object) -> None:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr("webhook.celworker.ProcessPoolExecutor", no_semaphores)
    before = children()
    program = worker.compile(long_selector(9_500_000), STORED_EXPRESSIONS)
    assert program.estimated_cost > 0 and children() == before


def test_a_worker_that_cannot_start_is_not_started_again(
    worker: CelWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each attempt would cost a process start and a traceback; after MAX_FAILURES in a row the
    server compiles long expressions itself for good."""
    started: list[object] = []

    def no_semaphores(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr("webhook.celworker.ProcessPoolExecutor", no_semaphores)
    for offset in range(MAX_FAILURES + 2):
        assert worker.compile(long_selector(9_600_000 + offset * 100), STORED_EXPRESSIONS).estimated_cost > 0
    assert len(started) == MAX_FAILURES
