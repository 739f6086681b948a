"""The fitting nodes' scores, kept from one scheduling cycle to the next, and the best node.

The dry run scores the fitting nodes as kube-scheduler's default profile does
(:func:`policies.scheduler.profile.scores`): per plugin a raw score, normalized over the fitting
nodes (from their lowest and highest raw score), times the plugin's weight; the best total wins,
the first of equals in node order. Placing pods one after another changes the raw scores of the
nodes they land on, and the fitting set; a board keeps what did not change:

* raw scores per node: a static one (the node's labels, taints, images) once, the others whenever
  the node is handed in again;
* per plugin the counts of its raw scores over the fitting nodes, so that a cycle sees at once
  whether the lowest or highest changed where the plugin normalizes by them. If not, every other
  node's total stands, and only the changed nodes' totals go onto a heap (highest total, then node
  order); if so, the heap is rebuilt from every fitting node, once.

A part whose scores depend on other nodes (:data:`FITTING`) is scored for every fitting node at
each update: the caller hands every node in then.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence

from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import FITTING, STATIC, ScorePart, as_is, zeros


class Board:
    """Scores of the fitting nodes (see the module docstring); ``positions``: node order."""

    def __init__(self, positions: Mapping[str, int]) -> None:
        self._positions = positions
        self._raw: dict[str, list[int]] = {}
        self._infos: dict[str, NodeInfo] = {}
        self._static: dict[tuple[str, int], int] = {}
        self._values: list[Counter[int]] = []
        self._spans: list[tuple[int, int]] = []
        self._totals: dict[str, int] = {}
        self._heap: list[tuple[int, int, str]] = []

    def __len__(self) -> int:
        return len(self._raw)

    def update(self, parts: Sequence[ScorePart], changed: Mapping[str, NodeInfo | None]) -> None:
        """The nodes ``changed`` name, with their NodeInfo when they fit (None: they do not)."""
        if not self._values:
            self._values = [Counter() for _ in parts]
        for name, info in changed.items():
            before = self._raw.pop(name, None)
            self._infos.pop(name, None)
            self._totals.pop(name, None)
            if before is not None:
                self._count(before, -1)
            if info is not None:
                raw = [self._raw_of(i, part, info) for i, part in enumerate(parts)]
                self._raw[name], self._infos[name] = raw, info
                self._count(raw, 1)
        spread = [i for i, part in enumerate(parts) if part.scope == FITTING]
        if spread:
            self._rescore(parts, spread)
        spans = [
            (min(c), max(c)) if c and part.normalize is not as_is else (0, 0)
            for part, c in zip(parts, self._values, strict=True)
        ]
        if spread or spans != self._spans:
            self._spans = spans
            self._totals = {name: self._total(parts, raw) for name, raw in self._raw.items()}
            self._heap = [(-total, self._positions[name], name) for name, total in self._totals.items()]
            heapq.heapify(self._heap)
            return
        for name in changed:
            if name in self._raw:
                total = self._totals[name] = self._total(parts, self._raw[name])
                heapq.heappush(self._heap, (-total, self._positions[name], name))

    def best(self) -> str | None:
        """The node the dry run places the next pod on; None when none fits."""
        heap = self._heap
        while heap:
            total, _, name = heap[0]
            if self._totals.get(name) == -total:
                return name
            heapq.heappop(heap)  # a node that changed or left since
        return None

    def _raw_of(self, i: int, part: ScorePart, info: NodeInfo) -> int:
        if part.scope == FITTING or part.raw is zeros:
            return 0  # scored over every fitting node (_rescore); or nothing to tell nodes apart
        if part.scope != STATIC:
            return part.raw([info])[info.name]
        key = (info.name, i)
        found = self._static.get(key)
        if found is None:
            found = self._static[key] = part.raw([info])[info.name]
        return found

    def _count(self, raw: list[int], sign: int) -> None:
        for value, counts in zip(raw, self._values, strict=True):
            counts[value] += sign
            if not counts[value]:
                del counts[value]

    def _rescore(self, parts: Sequence[ScorePart], spread: list[int]) -> None:
        """The parts scored over every fitting node at once, for every fitting node."""
        infos = list(self._infos.values())
        for i in spread:
            self._values[i] = Counter()
            scored = parts[i].raw(infos)
            for name, raw in self._raw.items():
                raw[i] = scored[name]
                self._values[i][raw[i]] += 1

    def _total(self, parts: Sequence[ScorePart], raw: list[int]) -> int:
        total = 0
        for part, value, (lowest, highest) in zip(parts, raw, self._spans, strict=True):
            normalized = value if part.normalize is as_is else part.normalize(value, lowest, highest)
            total += part.weight * normalized
        return total
