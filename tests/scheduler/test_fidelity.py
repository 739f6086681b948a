"""Generated scenarios through the real kube-scheduler 1.36 and ``draguard allocate``: every pod of
every scenario must get the same answer from both (see ``realscheduler.py`` for what "the same"
means, ``scenarios.py`` for what is generated).

The fixed seeds run in the suite (a few scenarios, tens of pods). For more, set
``DRAGUARD_FIDELITY_SEEDS``: a count (``200``: seeds 0..199), a range (``100-199``) or a list
(``3,17``); each seed builds its own scenario on the same control plane.
"""

from __future__ import annotations

import os
import time

import pytest
from realscheduler import Scene, disagreement
from scenarios import OTHER_NAMESPACE_LABELS, generate, resized_status

SEEDS_VAR = "DRAGUARD_FIDELITY_SEEDS"
FIXED_SEEDS = range(4)
ADMIN_ACCESS_LABEL = {"resource.kubernetes.io/admin-access": "true"}


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
    other = scene.namespace(f"{scene.ns}-other", OTHER_NAMESPACE_LABELS)
    scene.label_namespace(ADMIN_ACCESS_LABEL)
    scenario = generate(seed, scene.ns, other)
    for node in scenario.nodes:
        images = node.pop("images")
        scene.plane.add_node(**node)
        scene.node_names.append(node["name"])
        if images:
            scene.patch(f"/api/v1/nodes/{node['name']}/status", {"status": {"images": images}})
    for obj in [*scenario.objects, *scenario.load]:
        scene.create(obj)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for pod in scenario.load:
        if pod["metadata"]["name"] in scenario.resized:
            scene.set_status(pod, resized_status(pod, now))
    problems = []
    for i, pod in enumerate(scenario.pods):
        decision, answer = scene.ask(pod, settle=i == 0)
        found = disagreement(decision, answer)
        if found is not None:
            name = pod["metadata"]["name"]
            problems.append(f"seed {seed}, pod {name} (input: {scene.tmp / name}.yaml): {found}")
    assert not problems, "\n".join(problems)
