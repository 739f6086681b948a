"""PodTopologySpread and InterPodAffinity read the bound pods in groups (``NodePods.by_namespace``,
``NodePods.terms_groups``), each group worked out once per node and each labels mapping or set of
terms matched once per pod judged. Their answers must be those of reading every pod on its own.

The reference is the same plugins on a snapshot built afresh from the pods as models
(``Snapshot.build``): there every pod has a labels mapping and terms of its own, so every group is
one pod. The grouped side is the live state's: a :class:`Store` fed the pods' JSON through a
:class:`Reader` (the pods of one template share labels and terms), updated pod by pod between the
questions, its groups worked out before each update (a group that outlived its pods would answer
for the pods before the update).

The cluster, seeded: nodes in zones and racks, pods of a few apps in a few namespaces (labelled
by app and tier), some with pod affinity or anti-affinity (required and preferred, by namespace
list, by namespace selector, with matchLabelKeys), some being deleted; the questions are pods with
spread constraints (DoNotSchedule and ScheduleAnyway) and affinity terms of the same kinds.
"""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import decode
from policies.scheduler import interpodaffinity, podtopologyspread
from policies.scheduler.cluster import Cluster
from policies.scheduler.features import FeatureGates
from policies.scheduler.framework import Cycle, Prepared, Status
from policies.snapshot import Snapshot
from policies.store import Store
from policies.stored import Reader

NOW = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
NAMESPACES = ("team-a", "team-b", "team-c")
APPS = ("web", "cache", "trainer", "etl")
TOPOLOGY_KEYS = ("zone", "rack", "kubernetes.io/hostname")


def node(i: int) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": f"node-{i}", "rack": f"r{i % 4}"}
    if i % 7:  # every 7th node has no zone: spreading by zone refuses it
        labels["zone"] = f"z{i % 3}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": labels},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    }


def namespace(name: str) -> dict[str, Any]:
    tier = "prod" if name != "team-c" else "dev"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"tier": tier}}}


def term(rng: random.Random, app_of_pod: str | None = None) -> dict[str, Any]:
    """A pod affinity term: by app (or tier), in the pod's namespace, a list, or a selector."""
    chosen: dict[str, Any] = {"topologyKey": rng.choice(TOPOLOGY_KEYS)}
    if rng.random() < 0.7:
        chosen["labelSelector"] = {"matchLabels": {"app": rng.choice(APPS)}}
    else:
        chosen["labelSelector"] = {
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]
        }
    where = rng.random()
    if where < 0.3:
        chosen["namespaces"] = rng.sample(NAMESPACES, 2)
    elif where < 0.5:
        chosen["namespaceSelector"] = {"matchLabels": {"tier": "prod"}}
    elif where < 0.6:
        chosen["namespaceSelector"] = {}  # every namespace
    if app_of_pod is not None and rng.random() < 0.2:
        chosen["matchLabelKeys"] = ["version"]
    return chosen


def affinity(rng: random.Random, app: str | None = None) -> dict[str, Any]:
    def section() -> dict[str, Any]:
        found: dict[str, Any] = {}
        if rng.random() < 0.6:
            found["requiredDuringSchedulingIgnoredDuringExecution"] = [term(rng, app)]
        if rng.random() < 0.6:
            weighted = {"weight": rng.randint(1, 100), "podAffinityTerm": term(rng, app)}
            found["preferredDuringSchedulingIgnoredDuringExecution"] = [weighted]
        return found

    chosen: dict[str, Any] = {}
    if rng.random() < 0.5:
        chosen["podAffinity"] = section()
    if rng.random() < 0.7:
        chosen["podAntiAffinity"] = section()
    return chosen


def bound_pod(rng: random.Random, i: int, nodes: int, templates: list[dict[str, Any]]) -> dict[str, Any]:
    """A running pod made from one of ``templates`` (so that pods share labels and terms)."""
    template = rng.choice(templates)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{template['app']}-{i}",
            "namespace": template["namespace"],
            "uid": f"uid-{i}",
            "resourceVersion": "1",
            "labels": dict(template["labels"]),
        },
        "spec": {
            "nodeName": f"node-{rng.randrange(nodes)}",
            "containers": [{"name": "main", "image": "registry.example.com/app:1"}],
        },
        "status": {"phase": "Running"},
    }
    if template["affinity"]:
        pod["spec"]["affinity"] = template["affinity"]
    if rng.random() < 0.05:
        pod["metadata"]["deletionTimestamp"] = "2026-11-29T04:59:00Z"
    return pod


def templates(rng: random.Random) -> list[dict[str, Any]]:
    found = []
    for ns in NAMESPACES:
        for app in APPS:
            labels = {"app": app, "tier": rng.choice(["front", "back"]), "version": rng.choice(["v1", "v2"])}
            found.append(
                {
                    "namespace": ns,
                    "app": app,
                    "labels": labels,
                    "affinity": affinity(rng, app) if rng.random() < 0.5 else {},
                }
            )
    return found


def question(rng: random.Random) -> Pod:
    """The pod judged: in one of the namespaces, spreading and with affinity terms at random."""
    app = rng.choice(APPS)
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.example.com/app:1"}]}
    spread = []
    for when in ("DoNotSchedule", "ScheduleAnyway"):
        if rng.random() < 0.7:
            spread.append(
                {
                    "maxSkew": rng.randint(1, 3),
                    "topologyKey": rng.choice(TOPOLOGY_KEYS),
                    "whenUnsatisfiable": when,
                    "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                }
            )
    if spread:
        spec["topologySpreadConstraints"] = spread
    chosen = affinity(rng, app)
    if chosen:
        spec["affinity"] = chosen
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "question",
            "namespace": rng.choice(NAMESPACES),
            "labels": {"app": app, "version": "v1"},
        },
        "spec": spec,
    }
    pod = apply_defaults(decode(manifest), NOW)
    assert isinstance(pod, Pod)
    return pod


def answers(cluster: Cluster, pod: Pod) -> dict[str, Any]:
    """What the two plugins say of every node: filter verdicts (or PreFilter's) and raw scores."""
    cycle = Cycle(pod, cluster, FeatureGates())
    found: dict[str, Any] = {}
    for plugin in (interpodaffinity, podtopologyspread):
        prepared = plugin.pre_filter(cycle)
        if isinstance(prepared, Prepared):
            found[plugin.NAME] = {n.name: _verdict(prepared.filter(n)) for n in cluster.nodes}
        else:
            found[plugin.NAME] = _verdict(prepared)
    found["affinity scores"] = interpodaffinity.score_part(cycle).raw(cluster.nodes)
    found["spread scores"] = podtopologyspread.score(cycle, cluster.nodes)
    return found


def _verdict(status: Status | None) -> tuple[str, ...] | None:
    return None if status is None else status.reasons


def fresh(objects: list[dict[str, Any]], pods: dict[str, dict[str, Any]]) -> Cluster:
    """The reference: every pod read on its own, from a snapshot built afresh."""
    everything = [*objects, *pods.values()]
    return Cluster.of(Snapshot.build(apply_defaults(decode(copy.deepcopy(o)), NOW) for o in everything))


def warmed(cluster: Cluster) -> Cluster:
    """The cluster with every node's groups worked out (as a dry run before an update does)."""
    for info in cluster.nodes:
        assert info.load.by_namespace is not None and info.load.terms_groups is not None
    return cluster


class Live:
    """The live state's side: a store fed through a reader, as watch events feed it."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.reader = Reader(now=NOW)
        self.store = Store()
        for raw in objects:
            self.store.put(self.reader.object(raw))

    def put(self, raw: dict[str, Any]) -> None:
        read = self.reader.pod(copy.deepcopy(raw))
        assert read is not None
        self.store.put_pod(*read)

    def delete(self, raw: dict[str, Any]) -> None:
        self.store.delete("Pod", (raw["metadata"]["namespace"], raw["metadata"]["name"]))

    def cluster(self) -> Cluster:
        return Cluster.of(self.store.snapshot())


def change(
    rng: random.Random, live: Live, pods: dict[str, dict[str, Any]], nodes: int, shapes: list[dict[str, Any]]
) -> None:
    """A few watch events: relabels, moves, deletions started, pods gone, new pods."""
    for _ in range(rng.randint(1, 6)):
        name = rng.choice(sorted(pods))
        pod = copy.deepcopy(pods[name])
        what = rng.random()
        if what < 0.15:
            live.delete(pods.pop(name))
            continue
        if what < 0.4:
            pod["metadata"]["labels"]["app"] = rng.choice(APPS)
        elif what < 0.6:
            pod["metadata"]["labels"]["tier"] = (
                "front" if pod["metadata"]["labels"]["tier"] == "back" else "back"
            )
        elif what < 0.75:
            pod["spec"]["nodeName"] = f"node-{rng.randrange(nodes)}"
        elif what < 0.85:
            pod["metadata"]["deletionTimestamp"] = "2026-11-29T05:00:00Z"
        else:
            pod = bound_pod(rng, 10_000 + len(pods) + rng.randrange(10**6), nodes, shapes)
        pods[pod["metadata"]["name"]] = pod
        live.put(pod)


@pytest.mark.parametrize("seed", range(12))
def test_grouped_answers_are_every_pods_own_also_after_updates(seed: int) -> None:
    rng = random.Random(seed)
    nodes = rng.randint(6, 24)
    objects = [*(namespace(ns) for ns in NAMESPACES), *(node(i) for i in range(nodes))]
    shapes = templates(rng)
    pods = {}
    for i in range(rng.randint(40, 160)):
        pod = bound_pod(rng, i, nodes, shapes)
        pods[pod["metadata"]["name"]] = pod
    live = Live(objects)
    for pod in pods.values():
        live.put(pod)
    grouped = 0
    for _ in range(5):
        cluster = warmed(live.cluster())
        grouped += sum(g.pods > 1 for n in cluster.nodes for gs in n.load.by_namespace.values() for g in gs)
        reference = fresh(objects, pods)
        for _ in range(4):
            pod = question(rng)
            assert answers(cluster, pod) == answers(reference, pod)
        change(rng, live, pods, nodes, shapes)
    assert grouped, "no node had pods sharing labels: the groups were not put to the test"


def _spread_question() -> Pod:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "question", "namespace": "team-a", "labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "main", "image": "registry.example.com/app:1"}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": "cache"}},
                        }
                    ]
                }
            },
        },
    }
    pod = apply_defaults(decode(manifest), NOW)
    assert isinstance(pod, Pod)
    return pod


def test_an_update_is_seen_by_the_next_question_after_the_groups_were_worked_out() -> None:
    """Two web pods on node-1 (zone z1) make z1 two over the empty zones; one relabelled to cache
    leaves z1 one over (still refused at maxSkew 1 with the pod itself) and now keeps the pod off
    node-1 by its anti-affinity; the other deleted leaves z1 even."""
    objects = [*(namespace(ns) for ns in NAMESPACES), *(node(i) for i in (1, 2, 3))]
    shapes = [
        {"namespace": "team-a", "app": "web", "labels": {"app": "web", "tier": "front"}, "affinity": {}}
    ]
    rng = random.Random(0)
    pods = {}
    for i in range(2):
        pod = bound_pod(rng, i, 1, shapes)
        pod["spec"]["nodeName"] = "node-1"
        pod["metadata"].pop("deletionTimestamp", None)
        pods[pod["metadata"]["name"]] = pod
    live = Live(objects)
    for pod in pods.values():
        live.put(pod)
    question_pod = _spread_question()
    spread, anti = podtopologyspread.NAME, interpodaffinity.NAME
    refused = (podtopologyspread.REASON,)

    before = answers(warmed(live.cluster()), question_pod)
    assert before[spread] == {"node-1": refused, "node-2": None, "node-3": None}
    assert before[anti] == dict.fromkeys(("node-1", "node-2", "node-3"))  # no cache pod anywhere

    first, second = sorted(pods)
    relabelled = copy.deepcopy(pods[first])
    relabelled["metadata"]["labels"]["app"] = "cache"
    pods[first] = relabelled
    live.put(relabelled)
    after = answers(warmed(live.cluster()), question_pod)
    assert after[spread] == {"node-1": refused, "node-2": None, "node-3": None}
    assert after[anti] == {"node-1": (interpodaffinity.REASON_ANTI_AFFINITY,), "node-2": None, "node-3": None}
    assert after == answers(fresh(objects, pods), question_pod)

    live.delete(pods.pop(second))
    gone = answers(warmed(live.cluster()), question_pod)
    assert gone[spread] == {"node-1": None, "node-2": None, "node-3": None}
    assert gone == answers(fresh(objects, pods), question_pod)
