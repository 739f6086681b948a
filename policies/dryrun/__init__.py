"""Would this pod fit, where, with which devices, and if not, why: in the scheduler's own words.

The one place that answers it, for ``draguard allocate``, ``POST /v1/dryrun``, ``draguard test``
allocation tests, the quota rule and audit's ``unschedulable-pods``: kube-scheduler 1.36's default
filters (:mod:`policies.scheduler`) with the DRA plugin around the allocator, the scheduler's
whole-attempt behaviours, its default scoring, and what the devices cost (footprint, quota charge,
stranded devices). Modules: ``run`` (questions and attempts), ``answer`` (the answer's shape),
``costs`` (pricing), ``request`` (the dry-run endpoint's request body, decoded into a question).
"""

from policies.dryrun.answer import DryRunAnswer, DryRunResponse, NodeAnswer, PodAnswer
from policies.dryrun.costs import Costs, Inventory
from policies.dryrun.run import DryRun, Outcome, Prepared, Question, synthetic_pod, to_answer, with_uid
from policies.scheduler.claims import ClaimNotFoundError, allocated_claim_problem, pod_claims
from policies.scheduler.features import FeatureGates

__all__ = [
    "ClaimNotFoundError",
    "Costs",
    "DryRun",
    "DryRunAnswer",
    "DryRunResponse",
    "FeatureGates",
    "Inventory",
    "NodeAnswer",
    "Outcome",
    "PodAnswer",
    "Prepared",
    "Question",
    "allocated_claim_problem",
    "pod_claims",
    "synthetic_pod",
    "to_answer",
    "with_uid",
]
