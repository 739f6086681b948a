"""What the filter plugins share: a plugin's verdict on a node, and what it prepares once per pod.

Ported from kube-scheduler 1.36 ``staging/src/k8s.io/kube-scheduler/framework/interface.go``
(``Status``, its codes and ``Reasons``) and ``pkg/scheduler/framework/types.go`` (``FitError``).
A plugin is a module with ``NAME`` and ``pre_filter(cycle)``; ``pre_filter`` answers once per pod
with ``None`` (upstream ``Skip``: the plugin has nothing to do with this pod and its filter is not
run), a :class:`Status` (the pod is unschedulable before any node is looked at), or a
:class:`Prepared` whose ``filter`` is then asked about each node.
"""

from __future__ import annotations

from collections.abc import Callable
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
