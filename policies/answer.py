"""Whether the webhook's answer to a request admitted it, and what to undo when it did not.

A rule with lasting effects (the quota rule's charge in the shared ledger) may have written them
for an answer that went out without them: the deadline passed while the write was in flight, the
write timed out and the API server stored it later, or another rule denied the request. Such an
effect must not stay: a charge for a reservation the API server refused holds quota nobody uses,
and refuses reservations that fit (issue 30: 40 ledger charges for 31 admitted reservations under
load). The rule registers the undo here; the webhook settles the answer once, when it is sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Answer:
    """One request's answer, settled once: admitted or not; undos wait for it to be settled.

    Settled from the webhook's event loop, read from the threads that check and write: hence the
    lock. An undo must not block (it hands its work to a thread of its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._admitted: bool | None = None
        self._undos: list[Callable[[], None]] = []

    def settle(self, admitted: bool) -> None:
        """The answer went out: run the undos if it did not admit. Later calls change nothing."""
        with self._lock:
            if self._admitted is not None:
                return
            self._admitted = admitted
            undos, self._undos = self._undos, []
        if not admitted:
            for undo in undos:
                undo()

    def refused(self) -> bool:
        """Whether the answer went out without admitting the request."""
        return self._admitted is False

    def unless_admitted(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` once the answer is settled without admitting: later, or now if it already
        was; never if it admitted."""
        with self._lock:
            if self._admitted is None:
                self._undos.append(undo)
                return
            admitted = self._admitted
        if not admitted:
            undo()
