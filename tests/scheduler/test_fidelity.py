"""Generated scenarios through the real kube-scheduler 1.36 and ``draguard allocate``: every pod of
every scenario must get the same answer from both (see ``realscheduler.py`` for what "the same"
means, ``scenarios.py`` for what is generated).

The fixed seeds run in the suite (a few scenarios, tens of pods), chosen so that together they
reach every filter plugin, preemption and scoring among several nodes (checked by the last test,
so that a change to the generator cannot quietly stop exercising one). For more, set
``DRAGUARD_FIDELITY_SEEDS``: a count (``200``: seeds 0..199), a range (``100-199``) or a list
(``3,17``); each seed builds its own scenario on the same control plane.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane
from realscheduler import Decision, Scene, disagreement
from scenarios import OTHER_NAMESPACE_LABELS, generate, resized_status

SEEDS_VAR = "DRAGUARD_FIDELITY_SEEDS"
FIXED_SEEDS = (0, 1, 2, 3, 7)  # 7: the first seed with a cordoned node since the generator's nodes grew
ADMIN_ACCESS_LABEL = {"resource.kubernetes.io/admin-access": "true"}
REACHED: dict[int, set[str]] = {}  # seed -> what its pods reached (refusing plugins, outcomes)
MUST_REACH = {
    "NodeUnschedulable",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
    "fits on several nodes",
    "preempts",
    "binds with devices",
}


def seeds() -> list[int]:
    spec = os.environ.get(SEEDS_VAR, "").strip()
    if not spec:
        return list(FIXED_SEEDS)
    if "-" in spec:
        first, last = spec.split("-", 1)
        return list(range(int(first), int(last) + 1))
    if "," in spec:
        return [int(s) for s in spec.split(",") if s.strip()]
    return list(range(int(spec)))


@pytest.mark.parametrize("seed", seeds())
def test_generated_scenario_agrees_with_the_scheduler(scene: Scene, seed: int) -> None:
    problems = run_scenario(scene, seed)
    assert not problems, "\n".join(problems)


def run_scenario(scene: Scene, seed: int) -> list[str]:
    """Ask both about every pod of seed ``seed``'s scenario; what they disagree on, one entry per
    pod. What the pods reached is recorded in :data:`REACHED`."""
    other = scene.namespace(f"{scene.ns}-other", OTHER_NAMESPACE_LABELS)
    scene.label_namespace(ADMIN_ACCESS_LABEL)
    scenario = generate(seed, scene.ns, other)
    for node in scenario.nodes:
        images = node.pop("images")
        scene.add_node(**node)
        if images:
            scene.patch(f"/api/v1/nodes/{node['name']}/status", {"status": {"images": images}})
    for obj in [*scenario.objects, *scenario.load]:
        scene.create(obj)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for pod in scenario.load:
        if pod["metadata"]["name"] in scenario.resized:
            scene.set_status(pod, resized_status(pod, now))
    problems = []
    reached = REACHED.setdefault(seed, set())
    for pod in scenario.pods:
        decision, answer = scene.ask(pod)
        reached.update(what_it_reached(answer, decision))
        found = disagreement(decision, answer)
        if found is not None:
            name = pod["metadata"]["name"]
            if found.startswith("scoring:"):
                found += f"; pinned there, the scheduler says: {probe(scene, pod, answer['preferred'][0])}"
            events = "\n    ".join(scene.events(name))
            problems.append(
                f"seed {seed}, pod {name} (input: {scene.tmp / name}.yaml): {found}\n"
                f"  nominated: {decision.nominated}; events:\n    {events}"
            )
    return problems


def what_it_reached(answer: dict[str, Any], decision: Decision) -> set[str]:
    reached = {n["plugin"] for n in answer["nodes"] if n.get("plugin")}
    if answer["fitting"] > 1:
        reached.add("fits on several nodes")
    if decision.nominated:
        reached.add("preempts")
    if any(decision.devices):
        reached.add("binds with devices")
    return reached


def test_the_fixed_seeds_reach_every_filter_preemption_and_scoring(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """Whatever ran before: a fixed seed whose scenario has not run in this session runs here, each
    in a namespace of its own, so that the test never skips for want of the others."""
    for seed in FIXED_SEEDS:
        if seed in REACHED:
            continue
        (tmp_path / str(seed)).mkdir()
        with plane.namespace() as namespace:
            scene = Scene(plane, namespace, tmp_path / str(seed))
            try:
                problems = run_scenario(scene, seed)
            finally:
                scene.close()
        assert not problems, "\n".join(problems)
    reached = set().union(*(REACHED[s] for s in FIXED_SEEDS))
    assert reached >= MUST_REACH, f"not reached by seeds {list(FIXED_SEEDS)}: {sorted(MUST_REACH - reached)}"


def probe(scene: Scene, pod: dict[str, Any], node: str) -> str:
    """Whether the scheduler takes ``pod`` on ``node`` (a scoring difference, or a filter one?)."""
    pinned = copy.deepcopy(pod)
    pinned["metadata"]["name"] += "-probe"
    pinned["spec"]["nodeSelector"] = {
        **pinned["spec"].get("nodeSelector", {}),
        "kubernetes.io/hostname": node,
    }
    scene.post(f"/api/v1/namespaces/{scene.ns}/pods", pinned)
    decision = scene.decision(pinned["metadata"]["name"])
    return f"bound to {decision.node}" if decision.node else f"{decision.message}"
