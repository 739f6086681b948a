"""Go's ``sort.Slice`` (pattern-defeating quicksort, Go 1.19+), step for step.

``sort.Slice`` is not stable, and cel-go's ``sort()``/``sortBy()`` use it, so elements with equal
keys come out in the order this exact algorithm leaves them (for more than 12 elements that is not
the input order). Porting it is the only way to give the same answers. ``less(i, j)`` compares the
items currently at positions ``i`` and ``j``; ``swap`` exchanges them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

_MASK64 = (1 << 64) - 1


@dataclass
class _Data:
    less: Callable[[int, int], bool]
    swap: Callable[[int, int], None]


def go_sort_slice(length: int, less: Callable[[int, int], bool], swap: Callable[[int, int], None]) -> None:
    """sort.Slice: pdqsort with Go's limit of bits.Len(length) bad pivots."""
    _pdqsort(_Data(less, swap), 0, length, length.bit_length())


def _insertion_sort(d: _Data, a: int, b: int) -> None:
    for i in range(a + 1, b):
        j = i
        while j > a and d.less(j, j - 1):
            d.swap(j, j - 1)
            j -= 1


def _sift_down(d: _Data, lo: int, hi: int, first: int) -> None:
    root = lo
    while True:
        child = 2 * root + 1
        if child >= hi:
            return
        if child + 1 < hi and d.less(first + child, first + child + 1):
            child += 1
        if not d.less(first + root, first + child):
            return
        d.swap(first + root, first + child)
        root = child


def _heap_sort(d: _Data, a: int, b: int) -> None:
    first, hi = a, b - a
    for i in range((hi - 1) // 2, -1, -1):
        _sift_down(d, i, hi, first)
    for i in range(hi - 1, -1, -1):
        d.swap(first, first + i)
        _sift_down(d, 0, i, first)


_UNKNOWN, _INCREASING, _DECREASING = 0, 1, 2


def _pdqsort(d: _Data, a: int, b: int, limit: int) -> None:
    was_balanced = was_partitioned = True
    while True:
        length = b - a
        if length <= 12:
            _insertion_sort(d, a, b)
            return
        if limit == 0:
            _heap_sort(d, a, b)
            return
        if not was_balanced:
            _break_patterns(d, a, b)
            limit -= 1
        pivot, hint = _choose_pivot(d, a, b)
        if hint == _DECREASING:
            _reverse_range(d, a, b)
            pivot = (b - 1) - (pivot - a)
            hint = _INCREASING
        if was_balanced and was_partitioned and hint == _INCREASING and _partial_insertion_sort(d, a, b):
            return
        if a > 0 and not d.less(a - 1, pivot):
            a = _partition_equal(d, a, b, pivot)
            continue
        mid, was_partitioned = _partition(d, a, b, pivot)
        left, right = mid - a, b - mid
        threshold = length // 8
        if left < right:
            was_balanced = left >= threshold
            _pdqsort(d, a, mid, limit)
            a = mid + 1
        else:
            was_balanced = right >= threshold
            _pdqsort(d, mid + 1, b, limit)
            b = mid


def _partition(d: _Data, a: int, b: int, pivot: int) -> tuple[int, bool]:
    d.swap(a, pivot)
    i, j = a + 1, b - 1
    while i <= j and d.less(i, a):
        i += 1
    while i <= j and not d.less(j, a):
        j -= 1
    if i > j:
        d.swap(j, a)
        return j, True
    d.swap(i, j)
    i, j = i + 1, j - 1
    while True:
        while i <= j and d.less(i, a):
            i += 1
        while i <= j and not d.less(j, a):
            j -= 1
        if i > j:
            break
        d.swap(i, j)
        i, j = i + 1, j - 1
    d.swap(j, a)
    return j, False


def _partition_equal(d: _Data, a: int, b: int, pivot: int) -> int:
    d.swap(a, pivot)
    i, j = a + 1, b - 1
    while True:
        while i <= j and not d.less(a, i):
            i += 1
        while i <= j and d.less(a, j):
            j -= 1
        if i > j:
            return i
        d.swap(i, j)
        i, j = i + 1, j - 1


def _partial_insertion_sort(d: _Data, a: int, b: int) -> bool:
    i = a + 1
    for _ in range(5):
        while i < b and not d.less(i, i - 1):
            i += 1
        if i == b:
            return True
        if b - a < 50:
            return False
        d.swap(i, i - 1)
        if i - a >= 2:
            for j in range(i - 1, 0, -1):
                if not d.less(j, j - 1):
                    break
                d.swap(j, j - 1)
        if b - i >= 2:
            for j in range(i + 1, b):
                if not d.less(j, j - 1):
                    break
                d.swap(j, j - 1)
    return False


def _break_patterns(d: _Data, a: int, b: int) -> None:
    length = b - a
    if length < 8:
        return
    state = length
    modulus = 1 << length.bit_length()
    for idx in range(a + (length // 4) * 2 - 1, a + (length // 4) * 2 + 2):
        state ^= (state << 13) & _MASK64
        state ^= state >> 7
        state ^= (state << 17) & _MASK64
        other = state & (modulus - 1)
        if other >= length:
            other -= length
        d.swap(idx, a + other)


def _choose_pivot(d: _Data, a: int, b: int) -> tuple[int, int]:
    length = b - a
    swaps = [0]
    i, j, k = a + length // 4, a + length // 4 * 2, a + length // 4 * 3
    if length >= 8:
        if length >= 50:
            i = _median(d, i - 1, i, i + 1, swaps)
            j = _median(d, j - 1, j, j + 1, swaps)
            k = _median(d, k - 1, k, k + 1, swaps)
        j = _median(d, i, j, k, swaps)
    if swaps[0] == 0:
        return j, _INCREASING
    if swaps[0] == 12:
        return j, _DECREASING
    return j, _UNKNOWN


def _order2(d: _Data, a: int, b: int, swaps: list[int]) -> tuple[int, int]:
    if d.less(b, a):
        swaps[0] += 1
        return b, a
    return a, b


def _median(d: _Data, a: int, b: int, c: int, swaps: list[int]) -> int:
    a, b = _order2(d, a, b, swaps)
    b, c = _order2(d, b, c, swaps)
    a, b = _order2(d, a, b, swaps)
    return b


def _reverse_range(d: _Data, a: int, b: int) -> None:
    i, j = a, b - 1
    while i < j:
        d.swap(i, j)
        i, j = i + 1, j - 1
