"""``draguard allocate``: would the pending pods fit, where, with which devices, and if not, why.

What the command does, for its users, is :data:`DESCRIPTION` (``draguard allocate --help``).
Objects are defaulted as the API server would store them before anything is allocated.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from policies.allocator import SearchBudget
from policies.api.base import TypedObject
from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.dryrun import (
    DryRun,
    DryRunAnswer,
    FeatureGates,
    NodeAnswer,
    PodAnswer,
    Prepared,
    Question,
    synthetic_pod,
    with_uid,
)
from policies.dryrun.answer import Timing
from policies.priority import Priorities
from policies.reading import Reading
from policies.scheduler.claims import is_allocated
from policies.snapshot import Snapshot
from policies.validation.documents import admission_refusals, template_refusal
from webhook.commands import add_command
from webhook.commands.common import (
    TABLE_FORMATS,
    UsageError,
    add_cluster,
    add_file_flags,
    add_namespace,
    add_output,
    add_reading_flags,
    connect_cluster,
    default_namespace,
    print_notes,
    read_inputs,
    style,
)
from webhook.manifests import Entry, existing_warnings, latest
from webhook.output import CUT_NOTE, PLAIN, Progress, Style, Table, dump, terminal_width

if TYPE_CHECKING:  # the Kubernetes client is imported only when a cluster is asked
    from webhook.cluster import Cluster, Listed

DESCRIPTION = """\
Would the pending pods fit, on which nodes, with which devices, and if not, why: answered as
kube-scheduler 1.36's default profile would, in its words.

The files hold the cluster (Nodes, DeviceClasses, ResourceSlices, ResourceClaims, templates,
DeviceTaintRules, Namespaces, ResourceQuotas, PriorityClasses, running Pods) and the questions:
every Pod without spec.nodeName, and one pod of each workload's template (a Deployment's, a
Job's...), is asked about (--pod NAMESPACE/NAME picks some). Pods with spec.nodeName are load on
their node; claims with status.allocation are the allocated state. With no pending pod, the
claims not yet allocated are asked about, as one pod using them all. --sequence places the pods
one after another, each seeing what the previous ones took. A pod's priority comes from its
priorityClassName as the API server resolves it (system-node-critical and system-cluster-critical
need no document); where it fits nowhere, the answer says which node preemption would nominate
and which pods it would evict there.

The input is read as 'draguard validate' reads it: a document it cannot read, or a pod the API
server's Priority admission plugin would refuse (its priorityClassName is no class of the input),
is printed as validate prints it, and the exit code is 2. The objects are a cluster as it stands:
of two documents naming the same object the later one wins (a note says so), and what the API
server's validation says of an object is a warning, since kube-scheduler evaluates the objects a
cluster holds as they are (selectors in the stored-expressions environment).

Given a cluster (--kubeconfig FILE or --context NAME; read-only, never written to), its state is
listed from the API server as 'serve' lists it, and the files add the questions (pods, workloads,
their claims and templates), each written over the cluster's object of the same name as 'kubectl
apply' would; documents naming no namespace go to -n, else the context's namespace, else default.
Without either flag no cluster is read (not even ~/.kube/config).

Exit codes: 0 every pod fits somewhere, 1 some pod fits nowhere, 2 unusable input."""


class InputError(Exception):
    """Input the dry run cannot start from (exit code 2)."""


def register(sub: Any) -> None:
    p = add_command(sub, "allocate", DESCRIPTION)
    add_file_flags(p)
    add_reading_flags(p)
    add_cluster(p, "ask (only when this or --context is given): its state is listed, the files add to it")
    add_namespace(p)
    p.add_argument(
        "--node",
        dest="nodes",
        action="append",
        default=[],
        metavar="NAME",
        help="try only this node (repeatable); default: every Node in the input",
    )
    p.add_argument(
        "--pod",
        dest="pods",
        action="append",
        default=[],
        metavar="NAMESPACE/NAME",
        help="answer only this pending pod (repeatable); default: every pending pod in the input",
    )
    p.add_argument(
        "--sequence",
        action="store_true",
        help="place the pods one after another, each on its best node, as consecutive scheduling cycles "
        "would",
    )
    add_search_flags(p)
    add_output(p, (*TABLE_FORMATS, "name"))
    p.add_argument(
        "--repeat",
        type=int,
        default=0,
        metavar="N",
        help="answer each pod N more times per node on the warm allocator and report timing",
    )
    p.set_defaults(func=run)


def add_search_flags(p: argparse.ArgumentParser) -> None:
    """``--features``, ``--max-steps`` and ``--timeout``: the dry run's feature gates and its search
    budget per node (``allocate`` and ``headroom``)."""
    p.add_argument(
        "--features",
        default=None,
        metavar="LIST",
        help="Kubernetes feature gates as Name=true|false (DRAPartitionableDevices=false), on top of the "
        "1.36 defaults; or 'all', 'none' or a comma list of allocator switches",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=SearchBudget().max_invocations,
        metavar="N",
        help="give up a node after N search steps (default %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="give up a node after this long, like the scheduler's filter timeout (default 10)",
    )


def check_search_numbers(args: argparse.Namespace) -> None:
    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be at least 1, got {args.max_steps}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be more than 0 seconds, got {args.timeout:g}")


def _read(args: argparse.Namespace, use: str, cluster: Cluster | None, held: Priorities) -> list[Entry]:
    """The input, read as ``draguard validate`` reads it: what cannot be read is an
    :class:`InputError` with validate's lines. The objects describe a cluster as it stands, so the
    later of two documents naming the same object wins, and what validation says of an object is a
    warning on stderr (kube-scheduler evaluates stored objects as they are), never a refusal. A pod
    the Priority admission plugin refuses (a workload's pods too) is one: no cluster holds it."""
    entries, notes = latest(read_inputs(args, namespace=default_namespace(args, cluster)))
    print_notes(entries, sys.stderr)
    problems = [entry.problem or entry.where for entry in entries if entry.reading is None]
    problems += [f"{e.label}: {line}" for e in entries if e.reading is not None for line in e.reading.errors]
    priorities = Priorities.among(
        [*held.classes.values(), *(e.reading.obj for e in entries if e.reading and e.reading.obj)]
    )
    # A pod the Priority admission plugin would refuse is in no cluster, nor would a workload's
    # pods be: where they would fit is no question.
    problems += [
        f"{e.label}: {line}"
        for e in entries
        if e.reading is not None
        for line in admission_refusals(e.reading, priorities) or template_refusal(e.reading, priorities)
    ]
    if problems:
        heading = "input that cannot be read or that the API server would refuse (draguard validate says why)"
        raise InputError(heading + ":\n" + "\n".join(problems))
    if not any(e.reading is not None and e.reading.skipped is None for e in entries):
        raise InputError(f"no objects found in {', '.join(args.files)}")
    warnings = existing_warnings(entries, allow_privileged=args.allow_privileged, priorities=priorities)
    for line in [*notes, *warnings]:
        print(line, file=sys.stderr)
    for entry in entries:
        reading = entry.reading
        if reading is not None and reading.template is not None:
            print(
                f"note: {entry.where}: {reading.label}: {use} ({'.'.join(reading.template)})",
                file=sys.stderr,
            )
    return entries


def _as_created(reading: Reading) -> TypedObject | None:
    """The object read; a StatefulSet's pod as its controller creates it, with a
    PersistentVolumeClaim volume per volumeClaimTemplate (upstream
    ``pkg/controller/statefulset/stateful_set_utils.go``, ``updateStorage``; claim
    ``<template>-<set>-0``), so that the dry run says it did not check them."""
    obj = reading.obj
    if reading.kind != "StatefulSet" or not isinstance(obj, Pod) or reading.workload is None:
        return obj
    spec = reading.workload.get("spec")
    templates = spec.get("volumeClaimTemplates") if isinstance(spec, dict) else None
    names = [
        t["metadata"]["name"]
        for t in templates or ()
        if isinstance(t, dict) and isinstance(t.get("metadata"), dict) and t["metadata"].get("name")
    ]
    if not names:
        return obj
    claims = [{"name": n, "persistentVolumeClaim": {"claimName": f"{n}-{obj.name}-0"}} for n in names]
    others = [v for v in obj.spec.volumes or () if v.get("name") not in names]
    return obj.model_copy(update={"spec": obj.spec.model_copy(update={"volumes": claims + others})})


def stored_snapshot(
    args: argparse.Namespace, use: str = "allocating one pod of its template", cluster: Cluster | None = None
) -> tuple[Snapshot, list[str]]:
    """The objects as the API server stores them: defaulted, each pod's priority resolved (the
    input was judged first, so no pod is refused here); with a cluster, written over its state,
    and the files' pending pods (the questions: the cluster's own pending pods are not asked).
    ``use``: what the note on a workload says is done with its template's pod."""
    now = datetime.now(UTC)
    listed = _list(cluster) if cluster is not None else None
    held = Priorities.of(listed.store.snapshot().priority_classes.values()) if listed else Priorities.of(())
    entries = _read(args, use, cluster, held)
    objects = [
        apply_defaults(obj, now)
        for obj in (_as_created(e.reading) for e in entries if e.reading is not None and e.reading.obj)
        if obj is not None
    ]
    stored, _ = Priorities.among([*held.classes.values(), *objects]).store(objects)
    if listed is None:
        return Snapshot.build(stored), []
    from webhook.state import write_over

    write_over(listed.store, listed.reader, stored)
    asked = [o.key for o in stored if isinstance(o, Pod) and not o.spec.node_name]
    return listed.store.snapshot(), asked


def _list(cluster: Cluster) -> Listed:
    """The cluster's state, listed once; a note on stderr says what came from it."""
    from webhook.cluster import ClusterError

    try:
        listed = cluster.listed()
    except ClusterError as err:
        raise InputError(str(err)) from None
    counts = ", ".join(f"{n} {plural}" for plural, n in listed.counts.items() if n)
    print(f"note: read from {cluster.where} in {listed.seconds:.1f}s: {counts}", file=sys.stderr)
    return listed


def _nodes(snapshot: Snapshot, wanted: list[str]) -> list[str] | None:
    if not snapshot.nodes:
        raise InputError(
            "the input has no Node objects: add the cluster's, e.g. 'kubectl get nodes,deviceclasses,"
            "resourceslices,resourceclaims,resourceclaimtemplates,priorityclasses,pods -A -o yaml > "
            "cluster.yaml' and -f cluster.yaml"
        )
    unknown = [n for n in wanted if n not in snapshot.nodes]
    if unknown:
        known = ", ".join(snapshot.nodes)
        raise InputError(f"--node {', '.join(unknown)}: no such Node in the input (nodes: {known})")
    return wanted or None


def _questions(snapshot: Snapshot, wanted: list[str]) -> list[Question]:
    """The pending pods (those picked), or one question about the unallocated claims."""
    pending = {p.key: p for p in snapshot.pending.values()}
    unknown = [w for w in wanted if w not in pending]
    if unknown:
        raise InputError(
            f"--pod {', '.join(unknown)}: no such pending pod in the input "
            f"(pending: {', '.join(pending) or 'none'})"
        )
    if pending:
        return [Question(with_uid(pending[k])) for k in (wanted or pending)]
    claims = tuple(c for c in snapshot.all_claims if not is_allocated(c))
    if not claims:
        raise InputError(
            "nothing to ask: the input has no pending Pod (one without spec.nodeName) and no "
            "unallocated ResourceClaim"
        )
    namespace = claims[0].namespace or DEFAULT_NAMESPACE
    return [Question(synthetic_pod(namespace), claims)]


class NodeClock:
    """The per-node search deadline: the clock the budget reads restarts at every node, as the
    scheduler's filter timeout does. ``over`` is asked once per node: ``progress`` counts them
    against ``total``."""

    def __init__(self, progress: Callable[[int, int], None] | None = None, total: int = 0) -> None:
        self.started = time.monotonic()
        self._progress = progress
        self._total = total
        self._asked = 0

    def begin_node(self) -> None:
        self.started = time.monotonic()

    def over(self) -> bool:
        if self._progress is not None:
            self._asked += 1
            self._progress(min(self._asked, self._total), self._total)
        return False

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def _check_numbers(args: argparse.Namespace) -> None:
    check_search_numbers(args)
    if args.repeat < 0:
        raise UsageError(f"--repeat must be at least 0, got {args.repeat}")


def run(args: argparse.Namespace) -> int:
    try:
        _check_numbers(args)
        gates = FeatureGates() if args.features is None else FeatureGates.parse(args.features)
        snapshot, asked = stored_snapshot(args, cluster=connect_cluster(args))
        nodes = _nodes(snapshot, args.nodes)
        questions = _questions(snapshot, args.pods or asked)
    except (InputError, UsageError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with Progress("allocate") as progress:
        clock = NodeClock(progress, len(questions) * len(nodes or snapshot.nodes))
        budget = SearchBudget(max_invocations=args.max_steps, deadline=args.timeout, clock=clock.elapsed)
        dry = DryRun(Prepared.of(snapshot, gates), budget=budget, pace=clock)
        answers = dry.answer_all(questions, nodes, args.sequence)
    if args.repeat > 0 and not args.sequence:
        answers = [_timed(dry, q, a, args.repeat) for q, a in zip(questions, answers, strict=True)]
    document = DryRunAnswer(pods=answers, features=gates.changed())
    if args.output == "table":
        print_answer(document, sys.stdout, style(args))
    elif args.output == "name":
        print_names(document, sys.stdout)
    else:
        dump(document.to_json(), args.output, sys.stdout)
    if any(a.error for a in answers):
        return 2
    return 0 if all(a.fits for a in answers) else 1


def _timed(dry: DryRun, question: Question, answer: PodAnswer, repeat: int) -> PodAnswer:
    """The answer with each node's timing: the pod asked about that node alone, first and median."""

    def runs(node: str) -> Timing:
        call: Callable[[], object] = lambda: dry.outcome(question, [node])  # noqa: E731
        times = []
        for _ in range(repeat + 1):
            start = time.perf_counter_ns()
            call()
            times.append(time.perf_counter_ns() - start)
        return Timing(first_ns=times[0], median_ns=int(statistics.median(times[1:])))

    if answer.error:
        return answer
    nodes = [n.model_copy(update={"timing": runs(n.node)}) for n in answer.nodes]
    return answer.model_copy(update={"nodes": nodes})


# --- the table -----------------------------------------------------------------------------------------


def _devices(node: NodeAnswer) -> str:
    """The devices allocated on this node, ``DRIVER/POOL/DEVICE`` each: a pool and a device name
    are only unique within their driver."""
    devices = [
        f"{r['driver']}/{r['pool']}/{r['device']}"
        for result in node.results
        if result is not None
        for r in result.get("devices", {}).get("results", [])
    ]
    return ",".join(devices) or "-"


def _reason(node: NodeAnswer) -> str:
    return " ".join((node.detail or ", ".join(node.reasons)).split())


def _pod_head(pod: PodAnswer) -> list[str]:
    head = f"POD {pod.pod}: {pod.message}"
    if pod.placed_on:
        head += f"; --sequence places it on {pod.placed_on}"
    lines = [*(f"  earlier attempt: {m}" for m in pod.earlier_attempts), head]
    if pod.nominated:
        victims = ", ".join(pod.victims) or "no pod"
        lines.append(f"  preemption: nominates {pod.nominated}, evicting {victims}")
    return lines


def pod_table(pod: PodAnswer) -> Table:
    """A row per node asked."""
    rows = [
        (
            n.node,
            "yes" if n.fits else "no",
            "-" if n.score is None else str(n.score),
            _devices(n),
            "" if n.fits else _reason(n),
        )
        for n in pod.nodes
    ]
    return Table(("NODE", "FITS", "SCORE", "DEVICES", "REASON"), rows)


def print_answer(document: DryRunAnswer, out: TextIO, style: Style = PLAIN) -> None:
    """One block per pod (its message, then a row per node), then what was not checked, once."""
    width = terminal_width(out)
    blocks = []
    cut = False
    for pod in document.pods:
        lines = _pod_head(pod)
        if not pod.error:
            rows = pod_table(pod)
            lines.append(rows.render(width, style))
            cut |= rows.cut
        blocks.append("\n".join(lines))
    notes = list(dict.fromkeys(note for p in document.pods for note in p.not_checked))
    if document.features:
        notes.insert(0, f"feature gates: {', '.join(document.features)}")
    if notes:
        blocks.append("\n".join(f"note: {n}" for n in notes))
    print("\n\n".join(blocks), file=out)
    if cut:
        print(CUT_NOTE, file=sys.stderr)


def print_names(document: DryRunAnswer, out: TextIO) -> None:
    """``POD NODE`` for each node a pod fits on, the best scored first: for scripts."""
    for pod in document.pods:
        fitting = sorted((n for n in pod.nodes if n.fits), key=lambda n: -(n.score or 0))
        for node in fitting:
            print(f"{pod.pod} {node.node}", file=out)
