"""Each filter of the default profile on its own, from upstream's semantics (the plugin files named in
each module of policies/scheduler), and the profile's message and scoring arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import decode
from policies.scheduler import (
    extended,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    preemption,
    profile,
    tainttoleration,
)
from policies.scheduler.cluster import Cluster
from policies.scheduler.features import FeatureGates
from policies.scheduler.framework import Code, Cycle, Prepared, Status, by_highest, by_highest_reversed
from policies.snapshot import Snapshot

NOW_ = datetime(2026, 1, 1, tzinfo=UTC)


def node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    allocatable = spec.pop("allocatable", {"cpu": "4", "memory": "8Gi", "pods": "10"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str = "p", labels: dict[str, str] | None = None, namespace: str = "ns", **spec: Any
) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "c"}])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": containers, **spec},
    }


def cluster(*objects: dict[str, Any]) -> Cluster:
    return Cluster.of(Snapshot.build(apply_defaults(decode(o), NOW_) for o in objects))


def cycle(pod_manifest: dict[str, Any], *objects: dict[str, Any], gates: FeatureGates | None = None) -> Cycle:
    incoming = apply_defaults(decode(pod_manifest), NOW_)
    assert isinstance(incoming, Pod)
    return Cycle(incoming, cluster(*objects), gates or FeatureGates())


def verdicts(plugin: Any, c: Cycle) -> dict[str, Status | None]:
    prepared = plugin.pre_filter(c)
    assert isinstance(prepared, Prepared), prepared
    return {n.name: prepared.filter(n) for n in c.cluster.nodes}


def refused(plugin: Any, c: Cycle) -> dict[str, tuple[str, ...]]:
    return {name: s.reasons for name, s in verdicts(plugin, c).items() if s is not None}


# --- TaintToleration and NodeUnschedulable --------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "other", "effect": "NoSchedule"}, False),  # empty operator is Equal
        ({"key": "k", "operator": "Exists"}, True),  # any value, any effect
        ({"operator": "Exists"}, True),  # empty key with Exists tolerates every taint
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_toleration_matching(toleration: dict[str, Any], tolerated: bool) -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    c = cycle(pod(tolerations=[toleration]), node("n", taints=[taint]))
    assert refused(tainttoleration, c) == ({} if tolerated else {"n": ("node(s) had untolerated taint(s)",)})


@pytest.mark.parametrize(
    ("operator", "value", "taint_value", "tolerated"),
    [
        ("Gt", "4", "8", True),  # the taint's value is greater
        ("Gt", "8", "8", False),
        ("Lt", "8", "4", True),  # the taint's value is less
        ("Lt", "-1", "-2", True),
        ("Lt", "8", "x", False),  # not an integer: tolerates nothing
        ("Gt", " 4", "8", False),  # Go's ParseInt takes no spaces
    ],
)
def test_comparison_operators_need_their_gate(
    operator: str, value: str, taint_value: str, tolerated: bool
) -> None:
    toleration = {"key": "cores", "operator": operator, "value": value, "effect": "NoSchedule"}
    tainted = node("n", taints=[{"key": "cores", "value": taint_value, "effect": "NoSchedule"}])
    gated = FeatureGates.parse("TaintTolerationComparisonOperators=true")
    untolerated = {"n": ("node(s) had untolerated taint(s)",)}
    assert refused(tainttoleration, cycle(pod(tolerations=[toleration]), tainted, gates=gated)) == (
        {} if tolerated else untolerated
    )
    # Off by default in 1.36 (alpha): the operators tolerate nothing.
    assert refused(tainttoleration, cycle(pod(tolerations=[toleration]), tainted)) == untolerated


def test_prefer_no_schedule_taints_do_not_filter_but_score() -> None:
    soft = node("soft", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    c = cycle(pod(), soft, node("clean"))
    assert refused(tainttoleration, c) == {}
    assert [tainttoleration.score(c, n) for n in c.cluster.nodes] == [1, 0]
    # Normalized over the fitting nodes (highest 1), fewer untolerated taints scoring higher.
    assert [by_highest_reversed(raw, 0, 1) for raw in (1, 0)] == [0, 100]


def test_a_cordoned_node_takes_only_pods_tolerating_the_unschedulable_taint() -> None:
    nodes = (node("cordoned", unschedulable=True), node("open"))
    assert refused(nodeunschedulable, cycle(pod(), *nodes)) == {"cordoned": ("node(s) were unschedulable",)}
    tolerant = pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert nodeunschedulable.pre_filter(cycle(tolerant, *nodes)) is None  # nothing to check


def test_node_name_narrows_the_nodes_to_the_one_named() -> None:
    c = cycle(pod(nodeName="b"), node("a"), node("b"))
    prepared = nodename.pre_filter(c)
    assert prepared is not None and prepared.node_names == frozenset({"b"})
    assert refused(nodename, c) == {"a": ("node(s) didn't match the requested node name",)}


# --- NodeAffinity ---------------------------------------------------------------------------------


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


def test_node_selector_and_required_terms_both_apply() -> None:
    nodes = (
        node("a", {"zone": "a", "gpu": "yes"}),
        node("b", {"zone": "b", "gpu": "yes"}),
        node("c", {"zone": "a"}),
    )
    c = cycle(pod(nodeSelector={"gpu": "yes"}, affinity=required(expression("zone", "In", "a"))), *nodes)
    assert set(refused(nodeaffinity, c)) == {"b", "c"}


def test_terms_are_ored_an_empty_term_matches_nothing_an_unparsable_one_is_skipped() -> None:
    nodes = (node("a", {"zone": "a"}), node("b", {"zone": "b"}), node("c", {"rank": "7"}))
    terms = (
        expression("zone", "In", "a"),
        {},  # matches nothing
        expression("rank", "Gt", "x"),  # Gt needs an integer: the term is skipped, not an error
        expression("rank", "Gt", "5"),
    )
    assert set(refused(nodeaffinity, cycle(pod(affinity=required(*terms)), *nodes))) == {"b"}


def test_match_fields_name_the_nodes_before_any_filter_and_contradictions_refuse_the_pod() -> None:
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
    prepared = nodeaffinity.pre_filter(cycle(pod(affinity=required(fields)), node("a"), node("b"), node("c")))
    assert isinstance(prepared, Prepared) and prepared.node_names == frozenset({"a", "b"})
    contradiction = {
        "matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["a"]},
            {"key": "metadata.name", "operator": "In", "values": ["b"]},
        ]
    }
    status = nodeaffinity.pre_filter(cycle(pod(affinity=required(contradiction)), node("a"), node("b")))
    assert isinstance(status, Status) and status.reasons == ("pod affinity terms conflict",)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# --- NodePorts and NodeResourcesFit ---------------------------------------------------------------


def with_port(host_port: int, ip: str = "", protocol: str = "TCP", **container: Any) -> dict[str, Any]:
    port = {
        "containerPort": 80,
        "hostPort": host_port,
        "protocol": protocol,
        **({"hostIP": ip} if ip else {}),
    }
    return {"name": "c", "ports": [port], **container}


@pytest.mark.parametrize(
    ("used_ip", "wanted_ip", "protocol", "conflict"),
    [
        ("", "", "TCP", True),
        ("10.0.0.1", "", "TCP", True),  # 0.0.0.0 wanted: any IP of the same port conflicts
        ("", "10.0.0.2", "TCP", True),  # 0.0.0.0 used: every IP is taken
        ("10.0.0.1", "10.0.0.2", "TCP", False),
        ("", "", "UDP", False),
    ],
)
def test_host_port_conflicts(used_ip: str, wanted_ip: str, protocol: str, conflict: bool) -> None:
    bound = pod("web", nodeName="n", containers=[with_port(8080, used_ip)])
    c = cycle(pod(containers=[with_port(8080, wanted_ip, protocol)]), node("n"), bound)
    assert bool(refused(nodeports, c)) is conflict


def test_only_sidecars_hold_ports_among_init_containers_and_host_network_defaults_the_host_port() -> None:
    init = {**with_port(9000), "name": "init"}
    bound = pod("b", nodeName="n", initContainers=[init], containers=[{"name": "c"}])
    assert refused(nodeports, cycle(pod(containers=[with_port(9000)]), node("n"), bound)) == {}
    sidecar = pod(
        "s", nodeName="n", initContainers=[{**init, "restartPolicy": "Always"}], containers=[{"name": "c"}]
    )
    assert refused(nodeports, cycle(pod(containers=[with_port(9000)]), node("n"), sidecar)) != {}
    host = pod(hostNetwork=True, containers=[{"name": "c", "ports": [{"containerPort": 9000}]}])
    assert refused(nodeports, cycle(host, node("n"), sidecar)) != {}


def requests(cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": extra.pop("name", "c"), "resources": {"requests": {"cpu": cpu}}, **extra}


def test_requests_count_init_containers_sidecars_and_overhead_as_upstream() -> None:
    # regular 1 + sidecar 1 = 2; the init container needs 3 + the sidecar before it (1) = 4: peak 4.
    init = [requests("1", name="side", restartPolicy="Always"), requests("3", name="init")]
    c = cycle(pod(initContainers=init, containers=[requests("1")], overhead={"cpu": "500m"}), node("n"))
    assert noderesources.requests(c.pod).milli_cpu == 4500
    assert refused(noderesources, c) == {"n": ("Insufficient cpu",)}


def test_a_bound_pod_being_resized_counts_the_larger_of_its_spec_and_status() -> None:
    def resized(spec_cpu: str, status_cpu: str, allocated: str, *conditions: dict[str, str]) -> Any:
        bound = pod("b", nodeName="n", containers=[requests(spec_cpu)])
        bound["status"] = {
            "conditions": list(conditions),
            "containerStatuses": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": status_cpu}},
                    "allocatedResources": {"cpu": allocated},
                }
            ],
        }
        return cluster(node("n"), bound).by_name["n"].requested.milli_cpu

    assert resized("1", "2", "1") == 2000  # growing: the status already runs with 2
    assert resized("3", "2", "2") == 3000  # the spec asks for 3: the kubelet will give it
    infeasible = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
    assert resized("3", "2", "2", infeasible) == 2000  # never given: what runs counts
    # Without status resources (a kubelet that reports none) the spec counts.
    bound = pod("b", nodeName="n", containers=[requests("1")])
    bound["status"] = {"containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "4"}}]}
    assert cluster(node("n"), bound).by_name["n"].requested.milli_cpu == 1000


def test_bound_pods_pod_count_scalars_and_what_preemption_could_free() -> None:
    full = node("full", allocatable={"cpu": "4", "memory": "8Gi", "pods": "1", "example.com/nic": "1"})
    bound = pod("b", nodeName="full", containers=[requests("3")])
    want = pod(
        containers=[
            {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"example.com/nic": "2"}}}
        ]
    )
    (status,) = verdicts(noderesources, cycle(want, full, bound)).values()
    assert status is not None
    assert status.reasons == ("Too many pods", "Insufficient cpu", "Insufficient example.com/nic")
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # 2 NICs wanted, 1 on the node at all
    (status,) = verdicts(noderesources, cycle(pod(containers=[requests("2")]), full, bound)).values()
    assert status is not None and status.code == Code.UNSCHEDULABLE  # evicting the bound pod would do


def test_a_node_without_allocatable_is_not_judged_and_an_extended_resource_a_class_backs_is_left_to_dra() -> (
    None
):
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}}
    gpus = pod(containers=[{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}])
    gpu_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"extendedResourceName": "example.com/gpu"},
    }
    assert refused(noderesources, cycle(gpus, bare, node("plain"))) == {
        "plain": ("Insufficient example.com/gpu",)
    }
    assert refused(noderesources, cycle(gpus, bare, node("plain"), gpu_class)) == {}


# --- PodTopologySpread and InterPodAffinity ---------------------------------------------------------


def spread(max_skew: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
            **extra,
        }
    ]


def zones() -> tuple[dict[str, Any], ...]:
    return (node("a", {"zone": "a"}), node("b", {"zone": "b"}), node("none"))


def test_spread_skew_global_minimum_and_missing_label() -> None:
    bound = [pod(f"w{i}", {"app": "w"}, nodeName="a") for i in range(2)]
    c = cycle(pod(labels={"app": "w"}, topologySpreadConstraints=spread()), *zones(), *bound)
    assert refused(podtopologyspread, c) == {
        "a": ("node(s) didn't match pod topology spread constraints",),  # 2 + 1 - 0 > 1
        "none": ("node(s) didn't match pod topology spread constraints (missing required label)",),
    }
    # One pod in b too: the minimum is 1 and b fits (1 + 1 - 1); with minDomains 3 and only two
    # domains the minimum counts as 0, and b no longer fits either.
    in_b = [*bound, pod("w2", {"app": "w"}, nodeName="b")]
    assert "b" not in refused(
        podtopologyspread,
        cycle(pod(labels={"app": "w"}, topologySpreadConstraints=spread()), *zones(), *in_b),
    )
    few = cycle(pod(labels={"app": "w"}, topologySpreadConstraints=spread(minDomains=3)), *zones(), *in_b)
    assert set(refused(podtopologyspread, few)) == {"a", "b", "none"}


def test_spread_counts_only_nodes_the_pod_could_go_to_and_the_pod_namespace() -> None:
    bound = [
        pod("w0", {"app": "w"}, nodeName="b"),
        pod("other", {"app": "w"}, namespace="elsewhere", nodeName="a"),
    ]
    affinity = required(expression("zone", "In", "b"))
    c = cycle(
        pod(labels={"app": "w"}, affinity=affinity, topologySpreadConstraints=spread()), *zones(), *bound
    )
    # zone a is not counted (the pod's node affinity excludes it: nodeAffinityPolicy Honor), so the
    # only domain, b, is its own minimum.
    assert "b" not in refused(podtopologyspread, c)


def test_match_label_keys_narrow_the_selector_to_the_pods_own_values() -> None:
    bound = [pod(f"w{i}", {"app": "w", "rev": "old"}, nodeName="a") for i in range(3)]
    constraint = spread(matchLabelKeys=["rev"])
    c = cycle(pod(labels={"app": "w", "rev": "new"}, topologySpreadConstraints=constraint), *zones(), *bound)
    assert "a" not in refused(podtopologyspread, c)  # the old revision's pods do not count


def affinity_term(app: str, key: str = "zone", **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def test_pod_affinity_needs_a_matching_pod_in_the_domain_unless_it_is_the_first_of_its_group() -> None:
    wanted = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term("db")]}}
    bound = pod("db", {"app": "db"}, nodeName="b")
    c = cycle(pod(affinity=wanted), *zones(), bound)
    assert set(refused(interpodaffinity, c)) == {"a", "none"}
    first = cycle(pod(labels={"app": "db"}, affinity=wanted), *zones())  # matches its own term
    assert set(refused(interpodaffinity, first)) == {"none"}  # every node with the key will do


def test_anti_affinity_both_ways_and_namespace_selectors() -> None:
    avoid = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term("db")]}}
    c = cycle(pod(affinity=avoid), *zones(), pod("db", {"app": "db"}, nodeName="a"))
    assert refused(interpodaffinity, c) == {"a": ("node(s) didn't match pod anti-affinity rules",)}
    existing = pod("web", {"app": "web"}, nodeName="b", affinity=avoid)
    c = cycle(pod(labels={"app": "db"}), *zones(), existing)
    assert refused(interpodaffinity, c) == {
        "b": ("node(s) didn't satisfy existing pods anti-affinity rules",)
    }
    # A term naming another namespace by selector: the pod's namespace labels decide.
    team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {"team": "a"}}}
    by_selector = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                affinity_term("db", namespaceSelector={"matchLabels": {"team": "a"}})
            ]
        }
    }
    web = pod("web", {"app": "web"}, namespace="other", nodeName="b", affinity=by_selector)
    assert set(refused(interpodaffinity, cycle(pod(labels={"app": "db"}), *zones(), web, team))) == {"b"}


# --- the profile's message and scores ---------------------------------------------------------------


def test_the_fit_error_histogram_sorts_as_strings_like_go() -> None:
    statuses = [Status(Code.UNSCHEDULABLE, ("b reason",))] * 10 + [
        Status(Code.UNSCHEDULABLE, ("a reason",))
    ] * 2
    assert profile.histogram(statuses) == "10 b reason, 2 a reason"


NON_DRA_FILTERS = [
    nodeunschedulable,
    nodename,
    tainttoleration,
    nodeaffinity,
    nodeports,
    noderesources,
    podtopologyspread,
    interpodaffinity,
]


def preemption_of(incoming: dict[str, Any], *objects: dict[str, Any]) -> preemption.Preemption:
    """DefaultPreemption after an attempt of the filters (DRA aside) that fits nowhere."""
    c = cycle(incoming, *objects)
    attempt = profile.run(c, NON_DRA_FILTERS, c.cluster.nodes, profile.Unpaced())
    assert not attempt.fitting
    return preemption.preempt(c, attempt)


def small(name: str, **spec: Any) -> dict[str, Any]:
    return node(name, allocatable={"cpu": "2", "memory": "8Gi", "pods": "10"}, **spec)


def test_preemption_without_lower_priority_pods_finds_no_victims() -> None:
    found = preemption_of(
        pod(containers=[requests("2")]),
        small("a"),
        small("b", unschedulable=True),
        pod("equal", nodeName="a", containers=[requests("1")]),
    )
    assert found == preemption.Preemption(
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    never = pod(containers=[requests("3")], preemptionPolicy="Never")
    assert (
        preemption_of(never, small("a")).message == "preemption: not eligible due to preemptionPolicy=Never."
    )


def test_preemption_evicts_the_fewest_least_important_pods() -> None:
    low = pod("low", nodeName="a", priority=-10, containers=[requests("1")])
    lower = pod("lower", nodeName="a", priority=-20, containers=[requests("1")])
    found = preemption_of(pod(containers=[requests("1")]), small("a"), low, lower)
    # Only one CPU is missing: the more important of the two is reprieved.
    assert found.message is None and found.nominated == "a"
    assert [p.name for p in found.victims] == ["lower"]
    # On b the one victim has a higher priority than both of a's: a's victims are less important.
    b_low = pod("b-low", nodeName="b", priority=-5, containers=[requests("2")])
    found = preemption_of(pod(containers=[requests("2")]), small("a"), low, lower, small("b"), b_low)
    assert found.nominated == "a" and {p.name for p in found.victims} == {"low", "lower"}


def test_preemption_that_cannot_help_names_the_filter_still_refusing() -> None:
    low = pod("low", nodeName="a", priority=-1, containers=[requests("1")])
    equal = pod("equal", nodeName="a", containers=[requests("1")])
    # Without the low pod, 1 of the 2 CPUs is still taken by a pod of equal priority; asking for
    # more than the node has at all (3) would not even be tried.
    found = preemption_of(pod(containers=[requests("2")]), small("a"), low, equal)
    assert found.message == "preemption: 0/1 nodes are available: 1 Insufficient cpu."
    holder = pod(
        "holder", nodeName="a", containers=[{"name": "c", "ports": [{"containerPort": 1, "hostPort": 80}]}]
    )
    wants_port = pod(containers=[{"name": "c", "ports": [{"containerPort": 1, "hostPort": 80}]}])
    found = preemption_of(wants_port, small("a"), low, holder)
    assert found.message == (
        "preemption: 0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )


def test_pods_nominated_to_a_node_count_there_unless_less_important() -> None:
    nominated = pod("preemptor", containers=[requests("2")])
    nominated["status"] = {"nominatedNodeName": "a"}

    def fitting(priority: int) -> list[str]:
        c = cycle(pod(containers=[requests("1")], priority=priority), small("a"), small("b"), nominated)
        attempt = profile.run(c, NON_DRA_FILTERS, c.cluster.nodes, profile.Unpaced())
        return [v.node for v in attempt.fitting]

    assert fitting(0) == ["b"]  # a's 2 CPUs are promised to the nominated pod of equal priority
    assert fitting(1) == ["a", "b"]  # a more important pod may take them


def test_preemption_frees_a_port_another_pod_still_holds_as_upstream_does() -> None:
    port = {"name": "c", "ports": [{"containerPort": 1, "hostPort": 80}]}
    equal = pod("equal", nodeName="a", containers=[port])
    low = pod("low", nodeName="a", priority=-1, containers=[port])
    # The node keeps its host ports as a set: removing the low pod frees port 80 although the pod
    # of equal priority holds it too, so the scheduler nominates the node (a 1.36.2 scheduler did).
    found = preemption_of(pod(containers=[port]), small("a"), equal, low)
    assert found.nominated == "a" and [p.name for p in found.victims] == ["low"]


def test_preemption_recounts_pod_anti_affinity_without_the_victims() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term("db")]}}
    db = pod("db", {"app": "db"}, nodeName="a", priority=-1)
    found = preemption_of(pod(labels={"app": "web"}, affinity=anti), *zones()[:1], db)
    assert found.nominated == "a" and [p.name for p in found.victims] == ["db"]


def test_soft_spreading_scores_the_emptier_domain_higher() -> None:
    bound = [pod(f"w{i}", {"app": "w"}, nodeName="a") for i in range(2)]
    c = cycle(
        pod(labels={"app": "w"}, topologySpreadConstraints=spread(whenUnsatisfiable="ScheduleAnyway")),
        *zones(),
        *bound,
    )
    # a: round(2 pods * ln(2 zones + 2)) = 3, b: 0; "none" lacks the zone label and scores 0.
    assert podtopologyspread.score(c, c.cluster.nodes) == {"a": 0, "b": 100, "none": 0}
    by_host = spread(whenUnsatisfiable="ScheduleAnyway", topologyKey="kubernetes.io/hostname", maxSkew=2)
    hosts = [node(n, {"kubernetes.io/hostname": n}) for n in ("a", "b")]
    c = cycle(pod(labels={"app": "w"}, topologySpreadConstraints=by_host), *hosts, *bound)
    # a: round(2 * ln(4) + 1) = 4, b: round(0 + 1) = 1: 100 * (4 + 1 - s) // 4.
    assert podtopologyspread.score(c, c.cluster.nodes) == {"a": 25, "b": 100}
    # Only DoNotSchedule constraints: nothing to score.
    c = cycle(pod(labels={"app": "w"}, topologySpreadConstraints=spread()), *zones(), *bound)
    assert set(podtopologyspread.score(c, c.cluster.nodes).values()) == {0}


def test_pod_affinity_scores_preferred_terms_and_bound_pods_required_terms() -> None:
    near_db = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": affinity_term("db")}
            ]
        }
    }
    db = pod("db", {"app": "db"}, nodeName="b")
    c = cycle(pod(affinity=near_db), *zones(), db)
    assert interpodaffinity.score_part(c).normalized(c.cluster.nodes) == {"a": 0, "b": 100, "none": 0}
    # A bound pod's required affinity term the incoming pod matches counts 1 (hardPodAffinityWeight);
    # a preferred anti-affinity term of another counts against its zone.
    wants_web = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term("web")]}}
    shuns_web = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "podAffinityTerm": affinity_term("web")}
            ]
        }
    }
    bound = [pod("x", nodeName="a", affinity=wants_web), pod("y", nodeName="b", affinity=shuns_web)]
    c = cycle(pod(labels={"app": "web"}), *zones(), *bound)
    # a: +1, b: -5, none: 0 -> scaled between -5 and 1.
    assert interpodaffinity.score_part(c).normalized(c.cluster.nodes) == {"a": 100, "b": 0, "none": 83}


def test_image_locality_prefers_nodes_holding_the_images_scaled_by_their_spread() -> None:
    held = node("a")
    held["status"]["images"] = [{"names": ["registry.example.com/app:1"], "sizeBytes": 500 * 1024 * 1024}]
    latest = node("c")
    latest["status"]["images"] = [{"names": ["registry.example.com/tool:latest"], "sizeBytes": 10**9}]
    c = cycle(pod(containers=[{"name": "c", "image": "registry.example.com/app:1"}]), held, node("b"), latest)
    # 500 MB held by 1 of 3 nodes counts 166 MB: (166 - 23) / (1000 - 23) of 100.
    assert imagelocality.score_part(c).normalized(c.cluster.nodes) == {"a": 14, "b": 0, "c": 0}
    untagged = cycle(pod(containers=[{"name": "c", "image": "registry.example.com/tool"}]), held, latest)
    # ":latest", on 1 of 2 nodes
    assert imagelocality.score_part(untagged).normalized(untagged.cluster.nodes)["c"] == 46


def test_scores_least_allocated_balanced_and_normalized() -> None:
    busy = pod("busy", nodeName="a", containers=[requests("3")])
    c = cycle(pod(containers=[requests("1")]), node("a"), node("b"), busy)
    a, b = c.cluster.nodes
    wanted, as_requested = noderesources.scoring_requests(c)
    # a: (4000 - 4000) * 100 / 4000 = 0 cpu, memory (8Gi - 400Mi) / 8Gi = 95 -> 47; b: 75 and 97 -> 86
    assert (noderesources.least_allocated(wanted, a), noderesources.least_allocated(wanted, b)) == (47, 86)
    # 1.36 scores the change in balance: a: with the pod cpu 1.0 (clipped) and memory 0 -> 50,
    # without it 0.75 and 0 -> 62: 50 + (50 + 50 - 62) / 2 = 69; b: 0.25 and 0 -> 87, empty -> 100: 68.
    assert (
        noderesources.balanced_allocation(as_requested, a),
        noderesources.balanced_allocation(as_requested, b),
    ) == (69, 68)
    # As a 1.36.2 kube-scheduler logged them (-v=10): an empty 4-CPU 32Gi node given 2 CPUs and
    # 16Gi scores 75; a 16-CPU 32Gi node holding 500m scores 67 for the same pod.
    big = pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "16Gi"}}}])
    small_node = node("s", allocatable={"cpu": "4", "memory": "32Gi", "pods": "10"})
    big_node = node("b", allocatable={"cpu": "16", "memory": "32Gi", "pods": "10"})
    c = cycle(big, small_node, big_node, pod("load", nodeName="b", containers=[requests("500m")]))
    _, as_requested = noderesources.scoring_requests(c)
    assert [noderesources.balanced_allocation(as_requested, n) for n in c.cluster.nodes] == [75, 67]
    assert [by_highest(raw, 0, 3) for raw in (3, 1, 0)] == [100, 33, 0]
    # Pod-level requests fit the pod on the node, but least allocated sees only the containers'
    # (with the defaults, 100m and 200Mi): 1.36's NodeResourcesFit scorer skips pod-level resources.
    level = pod(containers=[{"name": "c"}], resources={"requests": {"cpu": "3", "memory": "8Gi"}})
    c = cycle(level, node("n", allocatable={"cpu": "8", "memory": "32Gi", "pods": "10"}))
    wanted, as_requested = noderesources.scoring_requests(c)
    assert (wanted.milli_cpu, as_requested.milli_cpu) == (100, 3000)
    assert noderesources.least_allocated(wanted, c.cluster.nodes[0]) == 98


# --- extended resources -------------------------------------------------------------------------------


def test_of_classes_naming_one_extended_resource_the_last_written_backs_it() -> None:
    def device_class(name: str, version: str | None, created: str = "2026-01-01T00:00:00Z") -> Any:
        meta = {
            "name": name,
            "creationTimestamp": created,
            **({"resourceVersion": version} if version else {}),
        }
        spec = {"extendedResourceName": "example.com/gpu"}
        return decode(
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta, "spec": spec}
        )

    def backing(*classes: Any) -> str:
        found = extended.DeviceClassResolver(classes).get("example.com/gpu")
        assert found is not None
        return found.name

    assert backing(device_class("b", "900"), device_class("a", "1000")) == "a"  # written last
    assert backing(device_class("a", "1000"), device_class("b", "900")) == "a"
    assert backing(device_class("b", None, "2026-01-02T00:00:00Z"), device_class("a", None)) == "b"
    assert backing(device_class("a", None), device_class("b", None)) == "b"  # a fresh list's order


def test_the_implicit_claim_asks_per_container_and_init_containers_reuse_later_devices() -> None:
    gpu_class = decode(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"extendedResourceName": "example.com/gpu"},
        }
    )
    resolver = extended.DeviceClassResolver([gpu_class])  # type: ignore[list-item]

    def gpus(name: str, count: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "resources": {"requests": {"cpu": "1", "example.com/gpu": count}}, **extra}

    incoming = decode(pod(initContainers=[gpus("init", "3")], containers=[gpus("main", "2")]))
    assert isinstance(incoming, Pod)
    made = extended.claim_requests(incoming, ["example.com/gpu"], resolver)
    # main is container 1; its resource is the second of its sorted request names (cpu, example.com/gpu).
    # init (container 0) reuses main's 2 and asks for 1 more.
    assert [(r.name, r.exactly.count if r.exactly else None) for r in made] == [
        ("container-0-request-1", 1),
        ("container-1-request-1", 2),
    ]
    assert resolver.backs("deviceclass.resource.kubernetes.io/gpu") and not resolver.backs("cpu")


# --- feature gates --------------------------------------------------------------------------------


def test_feature_gates_on_top_of_the_defaults_and_the_older_words() -> None:
    gates = FeatureGates.parse("DRAPartitionableDevices=false,DRAExtendedResource=false")
    assert not gates.allocator().partitionable_devices and gates.allocator().device_taints
    assert gates.changed() == ["DRAPartitionableDevices=false", "DRAExtendedResource=false"]
    exactly = FeatureGates.parse("deviceTaints")
    assert exactly.allocator().device_taints and not exactly.allocator().admin_access
    assert exactly.enabled("DRAExtendedResource")  # not an allocator switch: left at its default
    binding = FeatureGates.parse("DRAResourceClaimDeviceStatus=false").allocator()
    assert not binding.device_binding_and_status  # needs both of its gates
    with pytest.raises(ValueError, match="DRANope=true: unknown feature gate"):
        FeatureGates.parse("DRANope=true")
    with pytest.raises(ValueError, match="must be true or false"):
        FeatureGates.parse("DRAExtendedResource=maybe")
