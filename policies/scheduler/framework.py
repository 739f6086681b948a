"""What the filter plugins share: a plugin's verdict on a node, and what it prepares once per pod.

Ported from kube-scheduler 1.36 ``staging/src/k8s.io/kube-scheduler/framework/interface.go``
(``Status``, its codes and ``Reasons``) and ``pkg/scheduler/framework/types.go`` (``FitError``).
A plugin is a module with ``NAME`` and ``pre_filter(cycle)``; ``pre_filter`` answers once per pod
with ``None`` (upstream ``Skip``: the plugin has nothing to do with this pod and its filter is not
run), a :class:`Status` (the pod is unschedulable before any node is looked at), or a
:class:`Prepared` whose ``filter`` is then asked about each node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from policies.allocator import Explanation
from policies.api.core import Pod
from policies.scheduler.podinfo import PodInfo

if TYPE_CHECKING:
    from policies.scheduler.cluster import Cluster, NodeInfo
    from policies.scheduler.features import FeatureGates


MAX_NODE_SCORE = 100  # upstream framework.MaxNodeScore: a score plugin's normalized best


class Code(IntEnum):
    """upstream fwk.Code, the codes a filter returns."""

    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3


@dataclass(frozen=True)
class Status:
    """A refusal: upstream's reason strings (what ``kubectl describe pod`` shows), the plugin that
    gave them, and what draguard knows beyond them, which never enters the scheduler's message:
    the allocator's error text (``error``) and its explanation of why the devices do not fit."""

    code: Code
    reasons: tuple[str, ...]
    plugin: str = ""
    error: str | None = None
    explanation: Explanation | None = None

    def message(self) -> str:
        """upstream Status.Message(): the reasons joined with ", "."""
        return ", ".join(self.reasons)

    def detail(self) -> str | None:
        """draguard's words for the refusal, when it has more to say than the reasons."""
        return self.explanation.message() if self.explanation is not None else self.error

    @property
    def is_error(self) -> bool:
        return self.code == Code.ERROR


def unschedulable(plugin: str, *reasons: str, unresolvable: bool = False) -> Status:
    """A refusal by ``plugin``; filters build the ones with fixed reasons once, not per node."""
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    return Status(code, reasons, plugin)


NodeFilter = Callable[["NodeInfo"], Status | None]
"""A plugin's Filter for one pod: None when the node passes."""


@dataclass(frozen=True)
class Prepared:
    """What a plugin's PreFilter prepared: its filter and, like upstream's ``PreFilterResult``, the
    only node names worth filtering (None: all nodes)."""

    filter: NodeFilter
    node_names: frozenset[str] | None = None


@dataclass(frozen=True)
class Cycle:
    """One scheduling attempt of one pod: what every plugin's PreFilter may read."""

    pod: Pod
    cluster: Cluster
    gates: FeatureGates
    # The pod read as the cluster's pods are (labels, affinity, requests): once per attempt, and
    # carried into the what-if cycles of preemption (dataclasses.replace keeps it).
    info: PodInfo = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.info is None:
            object.__setattr__(self, "info", PodInfo.of(self.pod))


PreFilterOutcome = Prepared | Status | None


# --- scoring -------------------------------------------------------------------------------------

Normalizer = Callable[[int, int, int], int]
"""A raw score to 0..100, given the lowest and the highest raw score of the fitting nodes."""


def as_is(score: int, lowest: int, highest: int) -> int:
    return score


def by_highest(score: int, lowest: int, highest: int) -> int:
    """upstream helper.DefaultNormalizeScore (0 for every node when the highest is 0)."""
    return MAX_NODE_SCORE * score // highest if highest else 0


def by_highest_reversed(score: int, lowest: int, highest: int) -> int:
    """upstream helper.DefaultNormalizeScore with reverse: fewer is better."""
    return MAX_NODE_SCORE - MAX_NODE_SCORE * score // highest if highest else MAX_NODE_SCORE


def between(score: int, lowest: int, highest: int) -> int:
    """InterPodAffinity's NormalizeScore: scaled between the lowest and the highest (0 when equal)."""
    return 0 if highest == lowest else int(MAX_NODE_SCORE * ((score - lowest) / (highest - lowest)))


# How far a node's raw score reaches: the node and the pod alone (its labels, taints, images),
# also the node's own pods and devices, or the other fitting nodes too.
STATIC, NODE, FITTING = "static", "node", "fitting"


@dataclass(frozen=True)
class ScorePart:
    """One score plugin for one pod: raw scores of fitting nodes, normalized over them (``normalize``
    gets the lowest and highest raw score), times the plugin's weight in the default profile.
    ``scope`` says what a node's raw score depends on (:data:`STATIC`, :data:`NODE`,
    :data:`FITTING`), so that pods placed one after another recompute only what they change."""

    plugin: str
    weight: int
    raw: Callable[[Sequence[NodeInfo]], dict[str, int]]
    normalize: Normalizer = as_is
    scope: str = STATIC

    def normalized(self, fitting: Sequence[NodeInfo]) -> dict[str, int]:
        """The fitting nodes' scores, 0..100 (before the weight)."""
        raw = self.raw(fitting)
        lowest, highest = min(raw.values(), default=0), max(raw.values(), default=0)
        return {name: self.normalize(score, lowest, highest) for name, score in raw.items()}


def zeros(nodes: Sequence[NodeInfo]) -> dict[str, int]:
    """The raw scores of a plugin with nothing to tell the nodes apart."""
    return dict.fromkeys((n.name for n in nodes), 0)
