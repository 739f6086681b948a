"""The parser's recursion headroom is safe when threads compile at once (the webhook's pool does)."""

import sys
import threading

from policies.cel.parser import stack_headroom


def test_interleaved_blocks_in_two_threads_restore_the_limit() -> None:
    base = sys.getrecursionlimit()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def first() -> None:
        with stack_headroom(100):
            first_in.set()
            second_in.wait()
        first_out.set()

    def second() -> None:
        first_in.wait()
        with stack_headroom(300):
            second_in.set()
            first_out.wait()
            seen["second alone"] = sys.getrecursionlimit()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Per block, the second would have restored the limit the first had raised: base + 100 for good.
    assert sys.getrecursionlimit() == base
    assert seen["second alone"] == base + 300


def test_nested_blocks_add_up() -> None:
    base = sys.getrecursionlimit()
    with stack_headroom(50):
        with stack_headroom(20):
            assert sys.getrecursionlimit() == base + 70
        assert sys.getrecursionlimit() == base + 50
    assert sys.getrecursionlimit() == base
