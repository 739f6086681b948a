"""scheduling.k8s.io/v1 PriorityClass, and the two classes every cluster has without a manifest.

Upstream ``staging/src/k8s.io/api/scheduling/v1/types.go`` (the object), ``pkg/apis/scheduling/types.go``
(the reserved names and values) and ``pkg/apis/scheduling/v1/helpers.go`` (the system classes the
API server creates at bootstrap: ``system-node-critical`` and ``system-cluster-critical``, which
DRA driver pods name). ``value`` is a plain int32 in Go, so a document without one holds 0 (the
API server stores it so, checked against kube-apiserver 1.36.2).
"""

from __future__ import annotations

from policies.api.base import ObjectMeta, TypedObject
from policies.api.core import PREEMPT_LOWER_PRIORITY

GROUP = "scheduling.k8s.io"
API_VERSION = f"{GROUP}/v1"

SYSTEM_PREFIX = "system-"
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
# A pod with no class when no class is the global default (DefaultPriorityWhenNoDefaultClassExists).
NO_DEFAULT_PRIORITY = 0


class PriorityClass(TypedObject):
    value: int = 0
    global_default: bool | None = None
    description: str | None = None
    preemption_policy: str | None = None


def _system(name: str, value: int, description: str) -> PriorityClass:
    return PriorityClass(
        apiVersion=API_VERSION,
        kind="PriorityClass",
        metadata=ObjectMeta(name=name),
        value=value,
        description=description,
        preemptionPolicy=PREEMPT_LOWER_PRIORITY,
    )


# As the API server creates them (helpers.go's list, defaulted), in its order.
SYSTEM_CLASSES = (
    _system(
        SYSTEM_NODE_CRITICAL,
        SYSTEM_CRITICAL_PRIORITY + 1000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    _system(
        SYSTEM_CLUSTER_CRITICAL,
        SYSTEM_CRITICAL_PRIORITY,
        "Used for system critical pods that must run in the cluster, but can be moved to another node "
        "if necessary.",
    ),
)
