"""``POST /v1/dryrun`` on a whole cluster over HTTPS, against the same dry run done in-process (issue 7).

Run: ``python benchmarks/dryrun.py [--quick] [--profile] [--pods N]`` (about 2 minutes; ``--quick``,
500 nodes and fewer repetitions, about 10 s; ``--pods 100000`` adds the running pods of a cluster at
Kubernetes' scale limit as load, issue 23, about 8 minutes).

The cluster, written as one manifest file: 5,000 nodes (cpu, memory and pods allocatable, in three
zones) with one ResourceSlice of 8 GPUs each (a100 and h100 alternating), a DeviceClass, and 40% of
the devices already taken by one allocated ResourceClaim per node (``status.allocation`` naming 3
or 4 devices chosen at random, seeded, with a ``kubernetes.io/hostname`` node selector). Every
filter of the default profile has work: every 10th node is tainted NoSchedule, every 25th cordoned,
every 7th runs a pod holding 60 of its 63 CPUs (and host port 8080). The pod, in namespace
``bench``, asks for 4 CPUs and host port 8080, requires zones z0 or z1 (node affinity), spreads
over zones (DoNotSchedule) and has two ResourceClaims of the state: ``train-a`` asks for 2 a100s
(CEL selector), ``train-b`` for 1 GPU of any model. Only nodes that pass every other filter are
searched for 2 free a100s and a third free GPU.

``draguard serve --state`` runs as a subprocess over real TLS on 127.0.0.1 and the caller
authenticates with a client certificate signed by a CA generated here (``--dryrun-client-ca``).

Measured one request at a time on one keep-alive connection after a warm-up request of each kind,
the kinds alternating (load from elsewhere on the machine then falls on each alike), as wall time
seen by the client (up to the last byte of the answer, JSON decoding left out) and as CPU time of
the server process (``/proc``; it moves less than wall time when others use the machine):

* **HTTP, all nodes**: the pod with ``limit`` = every node, so the answer lists every node (the
  answer compared with ``draguard allocate`` below);
* **HTTP, top 20**: the same without ``limit`` (the endpoint's default of 20 answers);
* in this process, on the same file, alternating in the same way (the loaded snapshot frozen out
  of garbage collection as serve freezes it, the collector paused as the endpoint pauses it): the
  **endpoint's work** for the full and the default answer (``webhook.dryrun_api.encoded_answer``:
  no HTTP, TLS, authentication or worker thread); a **fresh allocator** (a new ``Prepared``) asked
  about the pod, as ``draguard allocate`` does once the manifests are loaded; the **DRA filter
  alone** on every node on the warm allocator, as the dry run was before it ran the other filters;
  and the **baseline**, the whole attempt with every filter on the warm allocator
  (``DryRun.outcome``), no answer built: the least the endpoint can cost. The filters must make
  the baseline faster than the DRA filter alone (a target, in CPU time), since they refuse nodes
  before the allocator searches them.

Ratios against the baseline show what the endpoint adds to the dry run (scoring, footprint, quota,
JSON, HTTP). Targets (issue 17): the HTTP p50 under 250 ms for the default answer and under 500 ms
for the full one, scaled by nodes / 5,000 for other sizes.

Results: every node entry in the HTTP answers (the full one, and the 20 entries of the default one)
must equal ``draguard allocate -f cluster.json -f pod.json -o json``'s, run as a subprocess on the
same files (it takes 15-20 s on 5,000 nodes, most of it loading the manifests). Exit codes: 0
targets met and results identical, 1 a target missed, 3 the results differ.

The load average is printed before and after: figures taken while others use the machine are
for comparing with each other, not with the targets. ``--profile`` prints a cProfile of the
endpoint's work in-process instead (the full answer, then the default one); to see the server
itself, ``py-spy record --native -p PID`` while it answers.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as dt
import gc
import json
import math
import os
import pstats
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
# Replace this script's directory: benchmarks/webhook.py would shadow the webhook package (and
# benchmarks/cel.py the cel engine).
sys.path[0] = str(ROOT)


from benchmarks import clustergen  # noqa: E402
from benchmarks.harness import gpu_node, start_serve, two_claim_pod  # noqa: E402
from certs.material import generate_ca, issue_client, issue_serving  # noqa: E402

DRIVER = "gpu.example.com"
CLASS = "gpu"
NAMESPACE = "bench"
GPUS = 8
ALLOCATED = 0.4
TARGET_MS = 500.0  # the full answer
TOP_TARGET_MS = 250.0  # the default answer
FULL_NODES = 5000
DEFAULT_LIMIT = 20  # the endpoint's default number of node answers
A100 = f'device.attributes["{DRIVER}"].model == "a100"'
EXIT_MISMATCH = 3


# --- the state ----------------------------------------------------------------------------------------


def hostname_selector(node: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
        ]
    }


def request(name: str, count: int, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": count}
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def resource_claim(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def cluster(nodes: int, seed: int = 7, pods: int = 0) -> dict[str, Any]:
    """A List manifest: the DeviceClass, the namespace, nodes with their slice and their allocated
    claim (40% of all devices, exactly, spread 3 or 4 per node), and the pod's two claims; with
    ``pods``, that many running pods as well, as :mod:`benchmarks.clustergen` makes them (about
    4.6 KB each, every fourth with pod anti-affinity or spreading), spread over the nodes."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    ]
    for n in range(nodes):
        name = f"node-{n:05d}"
        node, resource_slice = gpu_node(name, n, GPUS, DRIVER)
        if n % 10 == 9:
            node["spec"] = {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}
        if n % 25 == 24:
            node["spec"] = {**node.get("spec", {}), "unschedulable": True}
        items += [node, resource_slice]
        if n % 7 == 6:
            items.append(busy_pod(name))
        taken = 4 if n % 5 == 4 else 3  # 3.2 of 8 on average: 40%
        busy = resource_claim(f"busy-{name}", request("gpu", taken))
        busy["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": name, "device": f"gpu-{d}"}
                        for d in sorted(rng.sample(range(GPUS), taken))
                    ]
                },
                "nodeSelector": hostname_selector(name),
            }
        }
        items.append(busy)
    for i in range(pods):
        app = clustergen.APPS[i % len(clustergen.APPS)]
        name, namespace = f"{app}-{i:06d}", clustergen.namespace_name(i % 200)
        items.append(clustergen.pod(name, namespace, f"node-{i % nodes:05d}", app, f"load-{i}", None, rng))
    items.append(resource_claim("train-a", request("a100s", 2, A100)))
    items.append(resource_claim("train-b", request("any", 1)))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def busy_pod(node: str) -> dict[str, Any]:
    """A running pod holding 60 of the node's 63 CPUs and host port 8080."""
    container = {
        "name": "main",
        "image": "registry.example.com/batch:1",
        "ports": [{"containerPort": 8080, "hostPort": 8080}],
        "resources": {"requests": {"cpu": "60"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"batch-{node}", "namespace": "batch", "labels": {"app": "batch"}},
        "spec": {"nodeName": node, "containers": [container]},
    }


def pod() -> dict[str, Any]:
    """The benchmarked pod with work for every filter: zones z0/z1, spread over zones, host port."""
    manifest = two_claim_pod("trainer", NAMESPACE, ("train-a", "train-b"))
    manifest["metadata"]["labels"] = {"app": "trainer"}
    spec = manifest["spec"]
    spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    zones = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z0", "z1"]}]}
    required = {"nodeSelectorTerms": [zones]}
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    spec["topologySpreadConstraints"] = [{**spread, "labelSelector": {"matchLabels": {"app": "trainer"}}}]
    return manifest


# --- TLS --------------------------------------------------------------------------------------------


class Material:
    """Server CA and serving pair, client CA and client pair, written into ``directory``."""

    def __init__(self, directory: str) -> None:
        now = dt.datetime.now(dt.UTC)
        day = dt.timedelta(days=1)
        server_ca, client_ca = generate_ca(now, day), generate_ca(now, day)
        serving = issue_serving(server_ca, ["127.0.0.1"], now, day)
        client = issue_client(client_ca, "benchmark", (), now, day)

        def write(name: str, data: bytes) -> str:
            path = os.path.join(directory, name)
            Path(path).write_bytes(data)
            return path

        self.server_ca = write("ca.crt", server_ca.cert_pem)
        self.cert = write("tls.crt", serving.cert_pem)
        self.key = write("tls.key", serving.key_pem)
        self.client_ca = write("client-ca.crt", client_ca.cert_pem)
        self.client_cert = write("client.crt", client.cert_pem)
        self.client_key = write("client.key", client.key_pem)

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.server_ca)
        context.load_cert_chain(self.client_cert, self.client_key)
        return context


# --- the server -------------------------------------------------------------------------------------


def dryrun_flags(material: Material, nodes: int) -> list[str]:
    """The ``--dryrun-*`` flags: the client CA, and bounds that let one benchmark caller in at full
    speed (the per-caller rate limit is 2/s by default) and let the cold first request finish."""
    return [
        "--dryrun-client-ca", material.client_ca,
        "--dryrun-rate", "1000", "--dryrun-burst", "1000",
        "--dryrun-max-nodes", str(max(nodes, 5000)),
        "--dryrun-timeout", "60",
    ]  # fmt: skip


# --- measuring ----------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def cpu_ms(pid: int) -> float:
    """CPU time of process ``pid`` so far, all threads (Linux ``/proc``; NaN elsewhere), in ms."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


@dataclass
class Runs:
    """Per request: latency seen by the client and CPU the server spent, in ms."""

    latency: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


async def http_runs(
    url: str, context: ssl.SSLContext, bodies: Sequence[tuple[str, bytes]], repeat: int, server_pid: int
) -> tuple[dict[str, Runs], dict[str, Any], float]:
    """Every body in turn, ``repeat`` rounds, one request at a time, after one warm-up request of
    each (the first is the cold one: the server prepares the snapshot).

    Returns the runs by body name, the last answer of each, and the warm-up's latency. A latency
    ends when the whole body is read; decoding the JSON is left out (it is the client's)."""
    runs: dict[str, Runs] = {name: Runs() for name, _ in bodies}
    answers: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(ssl=context, limit=1)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=connector) as session:

        async def post(body: bytes) -> tuple[float, float, Any]:
            cpu = cpu_ms(server_pid)
            start = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                raw = await response.read()
            elapsed = (time.perf_counter() - start) * 1000
            cpu = cpu_ms(server_pid) - cpu
            answer = json.loads(raw)
            if response.status != 200:
                raise RuntimeError(f"dry run answered {response.status}: {answer}")
            if not answer["complete"]:
                raise RuntimeError(f"partial answer: {answer['checked']} of {answer['total']} nodes")
            return elapsed, cpu, answer

        warmup, _, _ = await post(bodies[0][1])
        for _, body in bodies:
            await post(body)
        for _ in range(repeat):
            for name, body in bodies:
                elapsed, cpu, answers[name] = await post(body)
                runs[name].latency.append(elapsed)
                runs[name].cpu.append(cpu)
    return runs, answers, warmup


class InProcess:
    """The same state and pod in this process: the baseline and the endpoint's work without HTTP."""

    def __init__(self, state: str, pod_manifest: dict[str, Any]) -> None:
        from policies.dryrun import FeatureGates, Prepared, Question, pod_claims
        from webhook.dryrun_api import DryRunSettings, parse_question
        from webhook.state import FileState

        now = dt.datetime.now(dt.UTC)
        self.snapshot = FileState.load([state], now).snapshot
        gc.collect()  # the loaded snapshot kept out of garbage collection, as serve does once synced
        gc.freeze()
        self.settings = DryRunSettings(max_nodes=max(FULL_NODES, len(self.snapshot.nodes)), timeout=60)
        body = json.dumps({"pod": pod_manifest, "limit": len(self.snapshot.nodes)}).encode()
        self.question = parse_question(body, self.settings, now)
        self.claims = pod_claims(self.snapshot, self.question.pod)
        self.gates = FeatureGates()
        self.prepared = Prepared.of(self.snapshot, self.gates)
        self.pod_question = Question(self.question.pod)

    def dry_run(self) -> int:
        """The baseline: the whole attempt (every filter, DRA last) on the warm allocator."""
        from policies.dryrun import DryRun

        return len(DryRun(self.prepared).outcome(self.pod_question).fitting)

    def searched(self) -> int:
        """How many nodes the allocator searched in the attempt: those every other filter passed."""
        from policies.dryrun import DryRun
        from policies.scheduler.dynamicresources import NAME

        attempt = DryRun(self.prepared).outcome(self.pod_question).attempt
        return sum(v.status is None or v.status.plugin == NAME for v in attempt.verdicts)

    def dra_only(self) -> int:
        """The DRA filter alone on every node, on the warm allocator (the dry run before issue 17)."""
        allocator = self.prepared.allocator.fork()
        nodes = self.snapshot.nodes.values()
        return sum(allocator.allocate(n, self.claims, quick_reject=True).results is not None for n in nodes)

    def fresh(self) -> int:
        """What ``draguard allocate`` does after loading: prepare the snapshot, answer the pod."""
        from policies.dryrun import DryRun, Prepared

        return len(DryRun(Prepared.of(self.snapshot, self.gates)).outcome(self.pod_question).fitting)

    def endpoint(self, limit: int | None = None) -> int:
        """The endpoint's worker once the snapshot is prepared: answer and encode (every node
        listed, or ``limit``)."""
        from webhook.dryrun_api import Deadlines, encoded_answer

        question = self.question if limit is None else replace(self.question, limit=limit)
        deadlines = Deadlines(time.monotonic, self.settings.timeout, self.settings.node_timeout)
        return len(encoded_answer(question, self.prepared, self.settings, deadlines))


def timed(measures: Mapping[str, tuple[Callable[[], object], int]]) -> dict[str, Runs]:
    """Wall and CPU time (this process) of each function, its given number of times, in ms; the
    functions take turns, each call with the garbage collector paused as the endpoint pauses it
    (``webhook.dryrun_api.CollectorPause``)."""
    from webhook.dryrun_api import COLLECTOR_PAUSE

    runs = {name: Runs() for name in measures}
    for turn in range(max(times for _, times in measures.values())):
        for name, (fn, times) in measures.items():
            if turn >= times:
                continue
            cpu, start = time.process_time(), time.perf_counter()
            with COLLECTOR_PAUSE:
                fn()
            runs[name].latency.append((time.perf_counter() - start) * 1000)
            runs[name].cpu.append((time.process_time() - cpu) * 1000)
    return runs


def allocate_cli(files: Sequence[str]) -> tuple[dict[str, dict[str, Any]], float]:
    """``draguard allocate -f ... -o json`` as a subprocess: the answer by node, and its wall time."""
    command = [sys.executable, "-m", "webhook.cli", "allocate", "-o", "json"]
    for f in files:
        command += ["-f", f]
    start = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"draguard allocate exited {done.returncode}: {done.stderr}")
    (answer,) = json.loads(done.stdout)["pods"]
    return {n["node"]: n for n in answer["nodes"]}, seconds


def differences(http: dict[str, Any], cli: dict[str, dict[str, Any]]) -> list[str]:
    """Where the endpoint's per-node answers differ from the CLI's (empty: identical)."""
    got = {n["node"]: n for n in http["nodes"]}
    problems = [f"{name}: only in draguard allocate" for name in sorted(cli.keys() - got.keys())]
    problems += [f"{name}: only in /v1/dryrun" for name in sorted(got.keys() - cli.keys())]
    for name in sorted(got.keys() & cli.keys()):
        for key in sorted(got[name].keys() | cli[name].keys()):
            if got[name].get(key) != cli[name].get(key):
                problems.append(
                    f"{name}: {key}: /v1/dryrun {got[name].get(key)!r} != allocate {cli[name].get(key)!r}"
                )
    return problems


# --- main ---------------------------------------------------------------------------------------------


def profile(in_process: InProcess) -> None:
    """cProfile of the endpoint's worker (the part of the serve process that takes the time), for
    the full answer and the default one."""
    in_process.endpoint()  # warm: CEL verdicts memoised, as on a serving process
    for limit in (None, DEFAULT_LIMIT):
        print(f"--- the endpoint's work, {'every node' if limit is None else f'top {limit}'}")
        prof = cProfile.Profile()
        prof.runcall(in_process.endpoint, limit)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


def load_average() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def row(name: str, runs: Runs) -> str:
    return (
        f"  {name:<46} {statistics.median(runs.latency):8.1f} {percentile(runs.latency, 99):8.1f} "
        f"{statistics.median(runs.cpu):8.1f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="500 nodes, 3 repetitions")
    parser.add_argument("--nodes", type=int, default=None, help="default 5000 (500 with --quick)")
    parser.add_argument("--repeat", type=int, default=None, help="requests per measure (default 15, 3 quick)")
    parser.add_argument(
        "--pods", type=int, default=0, help="running pods as load on the nodes (issue 23: 100000)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the endpoint's work in-process, then stop"
    )
    args = parser.parse_args(argv)
    nodes = args.nodes or (500 if args.quick else FULL_NODES)
    repeat = args.repeat or (3 if args.quick else 15)
    target = TARGET_MS * nodes / FULL_NODES
    top_target = TOP_TARGET_MS * nodes / FULL_NODES

    with tempfile.TemporaryDirectory(prefix="draguard-bench-") as tmp:
        state, pod_file = os.path.join(tmp, "cluster.json"), os.path.join(tmp, "pod.json")
        Path(state).write_text(json.dumps(cluster(nodes, pods=args.pods)))
        Path(pod_file).write_text(json.dumps(pod()))
        if args.profile:
            profile(InProcess(state, pod()))
            return 0
        material = Material(tmp)
        print(
            f"draguard serve: {nodes} nodes x {GPUS} GPUs, {ALLOCATED:.0%} allocated, {args.pods} running "
            "pods as load, pod with two claims"
        )
        load_before = load_average()
        flags = dryrun_flags(material, nodes)
        server, port, load_seconds = start_serve(state, material.cert, material.key, *flags)
        try:
            url = f"https://127.0.0.1:{port}/v1/dryrun"
            bodies = [
                ("top", json.dumps({"pod": pod()}).encode()),
                ("all", json.dumps({"pod": pod(), "limit": nodes}).encode()),
            ]
            http, answers, warmup = asyncio.run(
                http_runs(url, material.client_context(), bodies, repeat, server.pid)
            )
        finally:
            server.terminate()
            server.wait(timeout=10)
        expected, cli_seconds = allocate_cli([state, pod_file])

        local = InProcess(state, pod())
        local.dry_run()  # warm the allocator, as the server's warm-up request did
        searched = local.searched()
        measured = timed(
            {
                "baseline": (local.dry_run, repeat),
                "all": (local.endpoint, repeat),
                "top": (lambda: local.endpoint(DEFAULT_LIMIT), repeat),
                "dra": (local.dra_only, repeat),
                "fresh": (local.fresh, max(1, repeat // 3)),
            }
        )
        baseline, dra_only = measured["baseline"], measured["dra"]

    full, top = answers["all"], answers["top"]
    print(f"  serving after {load_seconds:.1f}s; first (cold) request {warmup:.0f} ms")
    print(
        f"  nodes: {full['total']} asked, {full['checked']} checked, {full['fitting']} fit, "
        f"{full['total'] - full['fitting']} do not; full answer {len(json.dumps(full)) / 1e6:.1f} MB"
    )
    print(
        f"  the allocator searched {searched} nodes; the other filters refused "
        f"{full['total'] - searched} before it"
    )
    print(f"  load average (1 min): {load_before} before, {load_average()} after the measures")
    print(f"{repeat} runs each, one at a time, ms:{'':19} p50 wall p99 wall  p50 CPU")
    print(row(f"HTTP, all {nodes} node answers", http["all"]))
    print(row(f"HTTP, top {DEFAULT_LIMIT} (the default limit)", http["top"]))
    print(row("in-process endpoint work, all (answer + JSON)", measured["all"]))
    print(row(f"in-process endpoint work, top {DEFAULT_LIMIT}", measured["top"]))
    print(row("in-process fresh allocator (draguard allocate)", measured["fresh"]))
    print(row("in-process DRA filter alone on every node", dra_only))
    print(row("baseline: in-process attempt, every filter", baseline))

    def ratio(runs: Runs, attribute: str) -> float:
        mine: list[float] = getattr(runs, attribute)
        base: list[float] = getattr(baseline, attribute)
        return statistics.median(mine) / statistics.median(base)

    print("ratios to the baseline (p50 wall / p50 CPU; CPU moves less when the machine is shared):")
    for name, runs in (
        ("HTTP, all node answers", http["all"]),
        (f"HTTP, top {DEFAULT_LIMIT}", http["top"]),
        ("in-process endpoint work", measured["all"]),
        (f"in-process endpoint work, top {DEFAULT_LIMIT}", measured["top"]),
        ("fresh allocator", measured["fresh"]),
        ("DRA filter alone (must be > 1)", dra_only),
    ):
        print(f"  {name:<46} {ratio(runs, 'latency'):5.2f} / {ratio(runs, 'cpu'):5.2f}")
    print(f"  (draguard allocate -o json as a subprocess, loading included: {cli_seconds:.1f}s)")

    problems = differences(full, expected)
    top_problems = differences(
        top, {n["node"]: expected[n["node"]] for n in top["nodes"] if n["node"] in expected}
    )
    problems += [f"top {DEFAULT_LIMIT}: {p}" for p in top_problems]
    p50, top50 = statistics.median(http["all"].latency), statistics.median(http["top"].latency)
    print("targets:")
    dra_cpu, every_cpu = statistics.median(dra_only.cpu), statistics.median(baseline.cpu)
    checks = [
        (f"p50 {p50:.1f} ms, all node answers over HTTP", p50 < target, f"< {target:.0f} ms"),
        (f"p50 {top50:.1f} ms, top {DEFAULT_LIMIT} over HTTP", top50 < top_target, f"< {top_target:.0f} ms"),
        (
            f"p50 CPU {every_cpu:.1f} ms, the attempt with every filter",
            every_cpu < dra_cpu,
            f"< {dra_cpu:.1f} ms, the DRA filter alone",
        ),
    ]
    for text, ok, bound in checks:
        print(f"  {'ok  ' if ok else 'MISS'} {text}   target {bound}")
    if problems:
        print(f"  MISS results: {len(problems)} differences from draguard allocate")
        for line in problems[:20]:
            print(f"    {line}")
        return EXIT_MISMATCH
    print(f"  ok   results: identical to draguard allocate on all {len(expected)} nodes")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
