"""ImageLocality's score: prefer nodes that already hold the pod's container images.

Upstream ``pkg/scheduler/framework/plugins/imagelocality/image_locality.go``: each container's
image present on the node (``status.images``, a name without a tag meaning ``:latest``) adds its
size scaled by the share of the cluster's nodes that hold it (so that an image everywhere does
not pull every pod to the same node); the sum, clamped between 23 MB and 1000 MB per container,
maps linearly onto 0..100. Weight 1 in the default profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from policies.api.core import Pod
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import MAX_NODE_SCORE, Cycle, ScorePart, zeros

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized(image: str) -> str:
    """upstream normalizedImageName: no tag after the last slash means ``:latest``."""
    return image if image.rfind(":") > image.rfind("/") else f"{image}:latest"


def _holders(nodes: Sequence[NodeInfo], wanted: set[str]) -> Mapping[str, int]:
    """How many nodes hold each wanted image (upstream ImageStateSummary.NumNodes)."""
    counts = dict.fromkeys(wanted, 0)
    for info in nodes:
        for name in wanted & info.image_sizes.keys():
            counts[name] += 1
    return counts


def score_part(cycle: Cycle) -> ScorePart:
    """Weight 1, the scores as they are; a node's depends on its images and on how many nodes
    hold each image, which placing pods does not change."""
    pod: Pod = cycle.pod
    containers = [*(pod.spec.init_containers or ()), *pod.spec.containers]
    images = [normalized(c.image) for c in containers if c.image]
    found: list[Mapping[str, int]] = []

    def raw(nodes: Sequence[NodeInfo]) -> dict[str, int]:
        if not found:  # the cluster's holders, counted once for the pod
            found.append(_holders(cycle.cluster.nodes, set(images)) if images else {})
        holders = found[0]
        if not any(holders.values()):
            return zeros(nodes)
        total = len(cycle.cluster.nodes)
        ceiling = MAX_CONTAINER_THRESHOLD * len(containers)
        scores = {}
        for info in nodes:
            sizes = info.image_sizes
            present = sum(int(sizes[i] * (holders[i] / total)) for i in images if i in sizes)
            clamped = min(max(present, MIN_THRESHOLD), ceiling)
            scores[info.name] = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (ceiling - MIN_THRESHOLD)
        return scores

    return ScorePart(NAME, 1, raw)
