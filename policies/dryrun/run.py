"""Would this pod fit, where, with which devices: kube-scheduler's default profile, run offline.

One attempt is :mod:`policies.scheduler.profile` over the nodes; around it, what the scheduler
does with the outcome:

* a fatal DRA filter error on any node aborts the attempt: the pod fits nowhere, and its
  PodScheduled condition says ``SchedulerError`` with the error;
* when no node fits, the DRA plugin's PostFilter may deallocate a claim that is allocated but
  reserved by no pod; the next attempt then allocates it afresh. The dry run says so and answers
  for that next attempt;
* fitting nodes are scored as the default profile scores them; the scheduler picks one of the
  best at random.

:class:`Prepared` is what every question on one snapshot shares (the allocator, the nodes with
their bound pods, the device inventory); :class:`DryRun` answers questions on it. With
``sequence``, pods are placed one after another, each on its best node, and the next pod sees
what the previous ones took (a new snapshot per placement, as consecutive scheduling cycles see).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from policies.allocator import AllocatedState, Allocator, SearchBudget
from policies.allocator.results import allocation_result_json
from policies.api.base import ObjectMeta
from policies.api.core import Pod, PodResourceClaimStatus, PodStatus
from policies.api.resource import (
    AllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
)
from policies.cel import Environment, SelectorCache
from policies.dryrun.answer import NodeAnswer, PodAnswer
from policies.dryrun.costs import Costs, Inventory
from policies.scheduler import profile
from policies.scheduler.claims import ClaimNotFoundError, is_allocated
from policies.scheduler.cluster import Cluster
from policies.scheduler.dynamicresources import DynamicResources
from policies.scheduler.extended import IN_MEMORY_NAME
from policies.scheduler.features import FeatureGates
from policies.scheduler.framework import Code, Cycle, Status
from policies.scheduler.preemption import Preemption, preempt
from policies.scheduler.profile import Attempt, Pace, Unpaced, Verdict
from policies.snapshot import Snapshot

SYNTHETIC_POD = "dryrun"
RANKING_NOTE = (
    "ranking: the scores of TaintToleration, NodeAffinity, NodeResourcesFit (least allocated), "
    "NodeResourcesBalancedAllocation, PodTopologySpread, InterPodAffinity, ImageLocality and "
    "DynamicResources, weighted as in the default profile; the cluster's default spreading "
    "(Services, controllers) is not scored; the scheduler breaks ties at random, and on clusters "
    "over 100 nodes scores only a sample of the fitting nodes"
)


@dataclass(frozen=True)
class Prepared:
    """What every question on one snapshot reuses. The allocator is forked per question: digested
    devices, selector verdicts and pools per node carry over, each answer is a fresh allocator's
    (building it per question cost 8x the dry run itself at 5,000 nodes, ``benchmarks/dryrun.py``).
    Not for use by several threads at once."""

    snapshot: Snapshot
    gates: FeatureGates
    allocator: Allocator
    cluster: Cluster
    state: AllocatedState
    cel_cache: SelectorCache

    @classmethod
    def of(cls, snapshot: Snapshot, gates: FeatureGates, cel_cache: SelectorCache | None = None) -> Prepared:
        """``cel_cache`` carries device bindings and selector results over from the previous
        snapshot's allocator (by slice generation): a new snapshot costs the changed devices only."""
        features = gates.allocator()
        cache = cel_cache or SelectorCache(
            Environment("stored", list_type_attributes=features.list_type_attributes)
        )
        state = AllocatedState.from_claims(snapshot.allocated_claims(), features)
        rules = snapshot.taint_rules if gates.enabled("DRADeviceTaintRules") else ()
        allocator = Allocator(
            features, state, snapshot.classes, snapshot.slices, taint_rules=rules, cel_cache=cache
        )
        return cls(snapshot, gates, allocator, Cluster.of(snapshot), state, cache)

    def after(self, snapshot: Snapshot) -> Prepared:
        """The same, for a snapshot whose allocated claims or bound pods changed."""
        return Prepared.of(snapshot, self.gates, self.cel_cache)

    @cached_property
    def inventory(self) -> Inventory:
        """The devices as the answer prices them (only fitting nodes need it)."""
        return Inventory.of(self.snapshot, self.state)


@dataclass(frozen=True)
class Question:
    """A pod to place; ``claims``: ask about these claims instead of the pod's (claims without a pod)."""

    pod: Pod
    claims: tuple[ResourceClaim, ...] | None = None


def synthetic_pod(namespace: str) -> Pod:
    """The pod a question about bare claims stands for: no containers, nothing else asked."""
    return Pod(apiVersion="v1", kind="Pod", metadata=ObjectMeta(name=SYNTHETIC_POD, namespace=namespace))


@dataclass
class Outcome:
    """One pod's final attempt, with what led to it and what scoring and pricing need."""

    question: Question
    prepared: Prepared
    snapshot: Snapshot
    attempt: Attempt
    dra: DynamicResources
    message: str = ""
    reason: str | None = None
    earlier: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    preemption: Preemption | None = None
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def fitting(self) -> list[Verdict]:
        return self.attempt.fitting

    def score(self, scores: dict[str, dict[str, int]]) -> None:
        """Set the fitting nodes' scores by plugin, and their totals (ranking reads them often)."""
        self.scores = scores
        self.totals = {node: sum(by_plugin.values()) for node, by_plugin in scores.items()}

    def total(self, node: str) -> int:
        return self.totals.get(node, 0)

    def preferred(self) -> list[str]:
        """The fitting nodes with the best score, in node order."""
        if not self.fitting:
            return []
        best = max(self.total(v.node) for v in self.fitting)
        return [v.node for v in self.fitting if self.total(v.node) == best]


class DryRun:
    """Answers questions on one prepared snapshot.

    ``snapshot``: the prepared snapshot plus unallocated claims and templates of the question (the
    dry-run endpoint's request objects); it must have the same allocated claims, bound pods and
    devices. ``budget``: the search budget per node; ``pace``: the shell's deadlines.
    """

    def __init__(
        self,
        prepared: Prepared,
        *,
        snapshot: Snapshot | None = None,
        budget: SearchBudget | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.prepared = prepared
        self.snapshot = snapshot or prepared.snapshot
        self.budget = budget or SearchBudget()
        self.pace: Pace = pace or Unpaced()

    def outcome(
        self, question: Question, nodes: Sequence[str] | None = None, *, listed: int | None = None
    ) -> Outcome:
        """The pod's attempt, repeated after each claim the scheduler deallocates; raises
        ClaimNotFoundError when a claim or template of the pod does not exist. ``listed``: how many
        nodes the answer will list (None: all), so that devices are assembled only for those."""
        prepared, snapshot = self.prepared, self.snapshot
        earlier: list[str] = []
        asked = len(prepared.cluster.nodes) if nodes is None else len(nodes)
        lazy = listed is not None and listed < asked
        while True:
            outcome = self._attempt(question, prepared, snapshot, nodes, lazy)
            failed = outcome.attempt.error is not None or outcome.attempt.binding_error is not None
            if outcome.attempt.fitting or failed or not outcome.attempt.complete:
                break
            post, claim = outcome.dra.post_filter(question.pod)
            outcome.message, outcome.preemption = _unschedulable_message(outcome, post)
            if claim is None or claim.name == IN_MEMORY_NAME or question.claims is not None:
                break
            earlier.append(outcome.message)
            snapshot = _deallocated(snapshot, claim)
            prepared = prepared.after(_deallocated(prepared.snapshot, claim))
        outcome.earlier = earlier
        self._conclude(outcome)
        return outcome

    def _attempt(
        self,
        question: Question,
        prepared: Prepared,
        snapshot: Snapshot,
        nodes: Sequence[str] | None,
        lazy: bool,
    ) -> Outcome:
        dra = DynamicResources(
            snapshot,
            prepared.allocator.fork(budget=self.budget),
            claims_override=question.claims,
            begin_node=self.pace.begin_node,
            lazy_results=lazy,
        )
        cycle = Cycle(question.pod, prepared.cluster, prepared.gates)
        asked = prepared.cluster.nodes if nodes is None else [prepared.cluster.by_name[n] for n in nodes]
        attempt = profile.run(cycle, profile.default_filters(dra), asked, self.pace)
        if attempt.error is None and any(v.fits for v in attempt.verdicts):
            attempt.binding_error = dra.binding_error(question.pod)
        return Outcome(question, prepared, snapshot, attempt, dra)

    def _conclude(self, outcome: Outcome) -> None:
        attempt = outcome.attempt
        if attempt.error is not None:
            status = attempt.error[1]
            outcome.reason = "SchedulerError"
            outcome.message = f'running "{status.plugin}" filter plugin: {status.message()}'
            return
        if attempt.binding_error is not None:
            outcome.reason, outcome.message = "SchedulerError", attempt.binding_error
            return
        if not attempt.fitting:
            outcome.reason = outcome.reason or "Unschedulable"
            return
        if len(attempt.fitting) > 1:  # upstream scores only when there is a choice
            cycle = Cycle(outcome.question.pod, outcome.prepared.cluster, outcome.prepared.gates)
            infos = [outcome.prepared.cluster.by_name[v.node] for v in attempt.fitting]
            outcome.score(profile.scores(cycle, outcome.dra, infos))
        outcome.message = _fits_message(outcome)

    # --- the answer --------------------------------------------------------------------------------

    def answer(
        self, question: Question, nodes: Sequence[str] | None = None, limit: int | None = None
    ) -> PodAnswer:
        """The pod's answer with at most ``limit`` nodes listed: the fitting ones best first, then
        the others by name (all nodes, in node order, without a limit)."""
        try:
            return to_answer(self.outcome(question, nodes, listed=limit), limit)
        except ClaimNotFoundError as err:
            return unanswerable(question, err)

    def answer_all(
        self, questions: Sequence[Question], nodes: Sequence[str] | None, sequence: bool
    ) -> list[PodAnswer]:
        """Every question; with ``sequence``, each pod that fits is placed on its best node (the
        first of equals in node order) before the next is asked."""
        answers = []
        current = self
        for question in questions:
            try:
                outcome = current.outcome(question, nodes)
            except ClaimNotFoundError as err:
                answers.append(unanswerable(question, err))
                continue
            answer = to_answer(outcome, None)
            if sequence and outcome.fitting:
                node = outcome.preferred()[0]
                answer = answer.model_copy(update={"placed_on": node})
                placed = place(outcome, node)
                current = DryRun(current.prepared.after(placed), budget=current.budget, pace=current.pace)
            answers.append(answer)
        return answers


def unanswerable(question: Question, err: ClaimNotFoundError) -> PodAnswer:
    """The answer for a pod whose claims or templates do not exist (the scheduler waits for them)."""
    return PodAnswer(pod=question.pod.key, claims=[], fits=False, message=str(err), error=str(err))


def with_uid(pod: Pod) -> Pod:
    """The pod with a stand-in UID when its manifest has none: claims are reserved by UID."""
    if pod.metadata.uid:
        return pod
    uid = f"dryrun-{pod.namespace or 'default'}-{pod.name}"
    return pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"uid": uid})})


# --- messages ----------------------------------------------------------------------------------------


def _unschedulable_message(outcome: Outcome, post_filter: str) -> tuple[str, Preemption]:
    """The PodScheduled message: the FitError, then the PostFilter plugins' messages (the DRA
    plugin's, then DefaultPreemption's), none at all when preemption nominates a node (upstream
    RunPostFilterPlugins returns the first success as it is)."""
    attempt, prepared = outcome.attempt, outcome.prepared
    cycle = Cycle(outcome.question.pod, prepared.cluster, prepared.gates)
    preemption = preempt(cycle, attempt)
    if preemption.message is None:
        return profile.fit_error(attempt), preemption
    return f"{profile.fit_error(attempt)} {post_filter}, {preemption.message}", preemption


def _preemption_note(preemption: Preemption | None) -> list[str]:
    if preemption is None or preemption.nominated is None:
        return []
    victims = ", ".join(p.key for p in preemption.victims)
    return [
        f"preemption: the scheduler would nominate {preemption.nominated} and evict {victims} there, "
        "then try the pod again (draguard reads no PodDisruptionBudgets; equal candidates are a "
        "random pick)"
    ]


def _fits_message(outcome: Outcome) -> str:
    fitting = outcome.fitting
    preferred = outcome.preferred()
    where = f"fits on {len(fitting)} of {outcome.attempt.asked} nodes"
    if len(fitting) == 1:
        return f"{where}: {fitting[0].node}"
    score = outcome.total(preferred[0])
    if len(preferred) == 1:
        return f"{where}; the default scoring prefers {preferred[0]} (score {score})"
    return (
        f"{where}; the default scoring ties {', '.join(preferred)} (score {score}); "
        "the scheduler picks one of them at random"
    )


LOCAL_VOLUMES = frozenset({"configMap", "secret", "emptyDir", "downwardAPI", "projected", "name"})


def _not_checked(outcome: Outcome) -> list[str]:
    pod = outcome.question.pod
    volumes = any(set(v) - LOCAL_VOLUMES for v in pod.spec.volumes or ())
    notes = [
        f"{plugins}: not checked: {what}"
        for plugins, what in profile.NOT_CHECKED.items()
        if volumes or "Volume" not in plugins
    ]
    unchecked = outcome.attempt.unchecked_resources
    if unchecked:
        shown = ", ".join(unchecked[:5]) + (f" and {len(unchecked) - 5} more" if len(unchecked) > 5 else "")
        notes.append(f"NodeResourcesFit: nodes without status.allocatable were not checked ({shown})")
    if outcome.question.pod.spec.scheduling_gates:
        notes.append("the pod has scheduling gates: the scheduler does not try it until they are removed")
    if len(outcome.fitting) > 1:
        notes.append(RANKING_NOTE)
    return notes + _preemption_note(outcome.preemption)


# --- from the outcome to the answer --------------------------------------------------------------------


def _results_json(results: Sequence[AllocationResult | None]) -> list[dict[str, object] | None]:
    return [None if r is None else allocation_result_json(r) for r in results]


def _refused(verdict: Verdict, claims: int) -> NodeAnswer:
    status = verdict.status
    assert status is not None
    explanation = status.explanation
    return NodeAnswer(
        node=verdict.node,
        fits=False,
        plugin=status.plugin,
        reasons=list(status.reasons),
        detail=status.detail(),
        explanation=explanation.to_json() if explanation is not None else None,
        results=[None] * claims,
        error=status.error,
    )


def _fitting(outcome: Outcome, verdict: Verdict, rank: int, costs: Costs) -> NodeAnswer:
    results = outcome.dra.results(verdict.node)
    price = costs.price(results)
    priced = (
        {"footprint_error": price} if isinstance(price, str) else {"footprint": price[0], "quota": price[1]}
    )
    return NodeAnswer(
        node=verdict.node,
        fits=True,
        results=_results_json(results),
        score=outcome.total(verdict.node) if outcome.scores else None,
        scores=outcome.scores.get(verdict.node),
        rank=rank,
        stranded=outcome.prepared.inventory.stranded(verdict.node, results),
        **priced,
    )


def to_answer(outcome: Outcome, limit: int | None) -> PodAnswer:
    """The answer document for an outcome; ``limit`` nodes listed at most (None: every node in order)."""
    pod, attempt, dra, preemption = outcome.question.pod, outcome.attempt, outcome.dra, outcome.preemption
    claims = dra.claims
    ranked = sorted(attempt.fitting, key=lambda v: (-outcome.total(v.node), v.node))
    ranks: dict[str, int] = {}
    for i, v in enumerate(ranked):
        previous = ranked[i - 1] if i else None
        same = previous is not None and outcome.total(previous.node) == outcome.total(v.node)
        ranks[v.node] = ranks[previous.node] if same and previous is not None else i + 1
    fitting_nodes = {v.node for v in attempt.fitting}
    if limit is None:
        listed = attempt.verdicts
    else:
        others = sorted((v for v in attempt.verdicts if v.node not in fitting_nodes), key=lambda v: v.node)
        listed = [*ranked, *others][:limit]
    costs = Costs.of(pod, claims, outcome.snapshot, outcome.prepared.inventory) if fitting_nodes else None
    nodes = [
        _fitting(outcome, v, ranks[v.node], costs)
        if costs is not None and v.node in fitting_nodes
        else _refused(_aborted(v, attempt), len(claims))
        for v in listed
    ]
    return PodAnswer(
        pod=pod.key,
        claims=[c.key for c in claims],
        fits=bool(attempt.fitting),
        reason=outcome.reason,
        message=outcome.message,
        preferred=outcome.preferred(),
        nominated=preemption.nominated if preemption is not None else None,
        victims=[p.key for p in preemption.victims] if preemption is not None else [],
        earlier_attempts=outcome.earlier,
        not_checked=_not_checked(outcome),
        nodes=nodes,
        checked=len(attempt.verdicts),
        total=attempt.asked,
        fitting=len(attempt.fitting),
        complete=attempt.complete,
    )


def _aborted(verdict: Verdict, attempt: Attempt) -> Verdict:
    """A node's verdict as the answer shows it: a node that passed an aborted attempt is refused
    with the error that aborted it."""
    if verdict.status is None and attempt.error is not None:
        node, status = attempt.error
        aborted = f"the scheduling attempt was aborted by node {node}: {status.error}"
        return Verdict(verdict.node, replace(status, error=aborted))
    if verdict.status is None and attempt.binding_error is not None:
        failed = f"the filters pass, but binding the pod fails: {attempt.binding_error}"
        return Verdict(verdict.node, Status(Code.ERROR, (), "DynamicResources", error=failed))
    return verdict


# --- the cluster after a placement or a deallocation ------------------------------------------------


def _deallocated(snapshot: Snapshot, claim: ResourceClaim) -> Snapshot:
    """The snapshot with ``claim``'s allocation and reservations gone (the DRA PostFilter's update)."""
    if (claim.namespace or "default", claim.name) not in snapshot.claims:
        return snapshot
    cleared = claim.model_copy(update={"status": ResourceClaimStatus()})
    return snapshot.with_claims_and_pods([cleared], [])


def place(outcome: Outcome, node: str) -> Snapshot:
    """The snapshot after the pod was bound to ``node`` with the node's allocations (see :func:`placed`)."""
    dra = outcome.dra
    claims, bound = placed(outcome.question.pod, dra.claims, dra.results(node), dra.extended_index, node)
    return outcome.snapshot.with_claims_and_pods(claims, [bound])


def placed(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    results: Sequence[AllocationResult | None],
    extended_index: int | None,
    node: str,
) -> tuple[list[ResourceClaim], Pod]:
    """What binding the pod to ``node`` with these results writes, as PreBind and Bind leave the
    cluster: its claims (``claims``, in the results' order) allocated and reserved for it, template
    claims and the extended-resource claim created (index ``extended_index``), the pod bound."""
    consumer = ResourceClaimConsumerReference(resource="pods", name=pod.name, uid=pod.metadata.uid or "")
    statuses = []
    written = []
    refs = {f"{pod.name}-{r.name}": r.name for r in pod.spec.resource_claims or ()}
    for i, (claim, result) in enumerate(zip(claims, results, strict=True)):
        if result is None:
            continue
        name = f"{pod.name}-extended-resources" if i == extended_index else claim.name
        reserved = (claim.status.reserved_for or []) if claim.status else []
        status = ResourceClaimStatus(allocation=result, reserved_for=[*reserved, consumer])
        renamed = claim.metadata if name == claim.name else claim.metadata.model_copy(update={"name": name})
        written.append(claim.model_copy(update={"metadata": renamed, "status": status}))
        if name in refs and not is_allocated(claim):
            statuses.append(PodResourceClaimStatus(name=refs[name], resource_claim_name=name))
    bound = pod.model_copy(
        update={
            "spec": pod.spec.model_copy(update={"node_name": node}),
            "status": (pod.status or PodStatus()).model_copy(
                update={"resource_claim_statuses": statuses or None}
            ),
        }
    )
    return written, bound
