"""Admission throughput, latency and memory of ``draguard serve``, against a bare aiohttp handler.

Run: ``python benchmarks/webhook.py [--quick]`` (loopback only; about 80 s, ``--quick``, one round of
each measure, about 10 s).

Both servers run as subprocesses on 127.0.0.1 with the same certificate, and the same client load
(aiohttp, keep-alive, TLS verified against the generated CA) is sent to each:

* the **bare handler** reads the body, decodes the JSON and echoes an allowing AdmissionReview with
  the request's uid: the floor any Python webhook on aiohttp pays for HTTP, TLS and JSON;
* **draguard** answers ``/validate`` for a Pod CREATE with two claims, with every registered rule,
  metrics and a JSON log line per decision, on a snapshot of 5,000 nodes with 8 devices each.

Measured: requests/s at a fixed concurrency (closed loop, in short rounds alternating between the
two servers, so that load from elsewhere on the machine falls on both alike; the ratio is the median
of the rounds' ratios), p50/p99 latency at that concurrency
and at a fixed 200 requests/s (open loop, also in alternating rounds, the p99 being the median of
the rounds': latency counts from the scheduled send time, so one stall delays a run of answers),
and draguard's resident memory
after loading the snapshot and after the load. Targets: throughput at least 70% of the bare
handler's, p99 under 10 ms at 200 requests/s, RSS under 300 MB. Client and servers share the
machine's cores, so absolute figures depend on the machine; the ratio is the comparable number.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
# Replace this script's directory: benchmarks/webhook.py would shadow the webhook package (and
# benchmarks/cel.py the cel engine).
sys.path[0] = str(ROOT)

from benchmarks.harness import gpu_node, start_serve, two_claim_pod, wait_for_line  # noqa: E402
from webhook.commands.serve import generate_pair  # noqa: E402

DRIVER = "gpu.example.com"
NAMESPACE = "bench"
CONCURRENCY = 16


def cluster(nodes: int, devices: int) -> dict[str, Any]:
    """A List manifest: one DeviceClass, ``nodes`` Nodes with one ResourceSlice of ``devices`` GPUs
    each, a namespace and the two claims the benchmarked pod references."""
    items: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    ]
    for n in range(nodes):
        name = f"node-{n:05d}"
        items += gpu_node(name, n, devices, DRIVER)
    for claim in ("bench-a", "bench-b"):
        items.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": claim, "namespace": NAMESPACE},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": DRIVER,
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": f'device.attributes["{DRIVER}"].model == "a100"'
                                            }
                                        }
                                    ],
                                },
                            }
                        ]
                    }
                },
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


def review(uid: int) -> dict[str, Any]:
    pod = two_claim_pod(f"trainer-{uid}", NAMESPACE, ("bench-a", "bench-b"))
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"bench-{uid}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": NAMESPACE,
            "name": pod["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": pod,
        },
    }


# --- the bare handler (run in its own process with --bare PORT CERT KEY) ----------------------------


def bare_server(port: int, cert: str, key: str) -> None:
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        uid = body["request"]["uid"]
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True},
        }
        return web.json_response(answer)

    app = web.Application(client_max_size=3 * 1024 * 1024)
    app.router.add_post("/validate", echo)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    print("ready", flush=True)
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=context, print=None, access_log=None)


# --- load ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    requests: int
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


async def send(session: aiohttp.ClientSession, url: str, body: bytes, uid: int) -> None:
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        answer = await response.json()
        if response.status != 200 or answer["response"]["uid"] != f"bench-{uid}":
            raise RuntimeError(f"bad answer {response.status}: {answer}")


def bodies(count: int) -> list[bytes]:
    return [json.dumps(review(i)).encode() for i in range(count)]


async def closed_loop(url: str, context: ssl.SSLContext, seconds: float, warmup: float) -> Result:
    """``CONCURRENCY`` clients, each sending its next request when the previous one is answered."""
    prepared = bodies(64)
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(ssl=context, limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        measure_from, end = start + warmup, start + warmup + seconds

        async def client(worker: int) -> None:
            i = worker
            while (now := time.perf_counter()) < end:
                await send(session, url, prepared[i % 64], i % 64)
                if now >= measure_from:
                    latencies.append(time.perf_counter() - now)
                i += CONCURRENCY

        await asyncio.gather(*(client(w) for w in range(CONCURRENCY)))
    return Result(len(latencies), seconds, latencies)


async def open_loop(url: str, context: ssl.SSLContext, rate: float, seconds: float) -> Result:
    """Requests started on a fixed schedule whatever the answers do; latency from the scheduled time."""
    prepared = bodies(64)
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(ssl=context, limit=64)
    async with aiohttp.ClientSession(connector=connector) as session:
        await send(session, url, prepared[0], 0)  # open the connections before the clock starts
        start = time.perf_counter()
        total = int(rate * seconds)

        async def one(i: int) -> None:
            scheduled = start + i / rate
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
            await send(session, url, prepared[i % 64], i % 64)
            latencies.append(time.perf_counter() - scheduled)

        await asyncio.gather(*(one(i) for i in range(total)))
    return Result(len(latencies), seconds, latencies)


# --- processes ----------------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(found.group(1)) / 1024 if found else float("nan")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_bare(cert: str, key: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    command = [sys.executable, __file__, "--bare", str(port), cert, key]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    wait_for_line(process, "ready", 30)
    time.sleep(0.3)  # run_app binds after printing
    return process, port


def merged(results: Iterable[Result]) -> Result:
    taken = list(results)
    latencies = [x for r in taken for x in r.latencies]
    return Result(len(latencies), sum(r.seconds for r in taken), latencies)


def row(name: str, result: Result) -> str:
    return (
        f"  {name:<26} {result.rate:9.0f} req/s   p50 {result.percentile(50):6.2f} ms   "
        f"p99 {result.percentile(99):6.2f} ms   ({result.requests} requests)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--bare", nargs=3, metavar=("PORT", "CERT", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        bare_server(int(args.bare[0]), args.bare[1], args.bare[2])
        return 0
    rounds, seconds, warmup = (1, 1.0, 0.5) if args.quick else (12, 1.0, 0.5)
    paced_rounds, paced = (1, 2.0) if args.quick else (5, 3.0)

    with tempfile.TemporaryDirectory(prefix="draguard-bench-") as tmp:
        ca = generate_pair(tmp, None)
        cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        state = os.path.join(tmp, "cluster.json")
        Path(state).write_text(json.dumps(cluster(args.nodes, args.devices)))
        context = ssl.create_default_context(cafile=ca)

        draguard, port, load_seconds = start_serve(state, cert, key)
        bare, bare_port = start_bare(cert, key)
        # This client imports draguard's modules (for generate_pair and the harness): a full garbage
        # collection walks them all and stalls the load for ~50 ms, whichever server it is timing.
        gc.collect()
        gc.freeze()
        try:
            rss_loaded = rss_mb(draguard.pid)
            bare_url, url = f"https://127.0.0.1:{bare_port}/validate", f"https://127.0.0.1:{port}/validate"
            pairs = [
                (asyncio.run(closed_loop(bare_url, context, seconds, warmup)),
                 asyncio.run(closed_loop(url, context, seconds, warmup)))
                for _ in range(rounds)
            ]  # fmt: skip
            steady_pairs = [
                (asyncio.run(open_loop(bare_url, context, 200.0, paced)),
                 asyncio.run(open_loop(url, context, 200.0, paced)))
                for _ in range(paced_rounds)
            ]  # fmt: skip
            rss_after = rss_mb(draguard.pid)
        finally:
            bare.terminate()
            draguard.terminate()
            draguard.wait(timeout=10)

    bare_result, ours = merged(p[0] for p in pairs), merged(p[1] for p in pairs)
    bare_p99s = [b.percentile(99) for b, _ in steady_pairs]
    p99s = [o.percentile(99) for _, o in steady_pairs]
    p99 = statistics.median(p99s)
    # A round in which the bare server completed nothing (a machine too busy to measure on) has no
    # ratio: it is shown as "-" and left out of the median, which is not taken when no round has one.
    ratios = [o.rate / b.rate if b.requests else None for b, o in pairs]
    measured = [r for r in ratios if r is not None]
    ratio = statistics.median(measured) if measured else float("nan")
    print(f"draguard /validate, Pod CREATE with two claims, {args.nodes} nodes x {args.devices} devices")
    print(f"  snapshot loaded and serving after {load_seconds:.1f}s")
    print(f"closed loop, {CONCURRENCY} concurrent clients, {rounds} alternating rounds of {seconds:g}s each:")
    print(row("bare aiohttp handler", bare_result))
    print(row("draguard", ours))
    print(f"  ratio per round: {' '.join('-' if r is None else f'{r:.2f}' for r in ratios)}")
    if len(measured) < len(ratios):
        unmeasured = len(ratios) - len(measured)
        print(f"  ({unmeasured} of {rounds} rounds not measured: the bare handler completed nothing in them)")
    print(f"open loop, 200 req/s, {paced_rounds} alternating rounds of {paced:g}s each:")
    print(row("bare aiohttp handler", merged(p[0] for p in steady_pairs)))
    print(row("draguard", merged(p[1] for p in steady_pairs)))
    print(f"  p99 per round, draguard: {' '.join(f'{x:.2f}' for x in p99s)}")
    print(f"  p99 per round, bare:     {' '.join(f'{x:.2f}' for x in bare_p99s)}")
    print("targets:")
    checks = [
        (f"throughput ratio {ratio:.2f} (draguard / bare, median of rounds)", ratio >= 0.70, ">= 0.70"),
        (f"p99 at 200 req/s {p99:.2f} ms (median of rounds)", p99 < 10.0, "< 10 ms"),
        (f"RSS {max(rss_loaded, rss_after):.0f} MB (loaded {rss_loaded:.0f}, after load {rss_after:.0f})",
         max(rss_loaded, rss_after) < 300.0, "< 300 MB"),
    ]  # fmt: skip
    for text, ok, target in checks:
        print(f"  {'ok  ' if ok else 'MISS'} {text}   target {target}")
    if ours.latencies and bare_result.latencies:
        median = statistics.median(ours.latencies) / statistics.median(bare_result.latencies)
        print(f"  (median closed-loop latency ratio {median:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
