"""How much effort one ``allocate`` call may spend before it gives up.

The scheduler bounds the exponential backtracking search with a Filter timeout (10 s by default,
DRASchedulerFilterTimeout) and reports "filter operation aborted: <cause>". draguard bounds it with
a count of search steps (allocateOne calls, the unit upstream's tests measure) and an optional
deadline. policies/ has no clock of its own: a deadline comes with the clock that reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SearchBudget:
    """Limits for one allocation search; ``None`` means unlimited.

    ``deadline`` is a value of ``clock`` (for example ``time.monotonic``) after which the search
    stops; the clock is read every ``clock_interval`` steps so that reading it stays cheap.
    """

    max_invocations: int | None = 1_000_000
    deadline: float | None = None
    clock: Callable[[], float] | None = None
    clock_interval: int = 256

    def __post_init__(self) -> None:
        if self.deadline is not None and self.clock is None:
            raise ValueError(
                "SearchBudget.deadline needs SearchBudget.clock, the function the deadline is measured "
                "with (for example time.monotonic)"
            )
        if self.max_invocations is not None and self.max_invocations < 1:
            raise ValueError("SearchBudget.max_invocations must be at least 1 (or None for no limit)")
        if self.clock_interval < 1:
            raise ValueError("SearchBudget.clock_interval must be at least 1")
