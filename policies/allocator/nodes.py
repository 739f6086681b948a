"""Node selection: which slices and devices a node can reach, and where a result is usable.

Matching follows ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` (terms are ORed; inside
a term label expressions and ``metadata.name`` field expressions are ANDed; an empty term matches
nothing). The result selector follows ``createNodeSelector`` in upstream
``structured/internal/incubating/allocator_incubating.go``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from policies.api.base import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm

NODE_NAME_FIELD = "metadata.name"
_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: None for anything it refuses, out of range included."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


class NodeSelectorError(ValueError):
    """A node selector that nodeaffinity would refuse to parse."""


def node_matches(
    node_name: str | None,
    labels: Mapping[str, str],
    *,
    wanted_name: str | None,
    all_nodes: bool,
    selector: NodeSelector | None,
) -> bool:
    """Whether a slice or device with these node fields is reachable from the node.

    ``node_name``/``labels`` describe the node; ``wanted_name``, ``all_nodes`` and ``selector`` are
    the slice's (or device's) fields, checked in that order as upstream NodeMatches does.
    ``node_name is None`` stands for "no node": only ``allNodes`` matches then.
    """
    if wanted_name:
        return node_name is not None and node_name == wanted_name
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node_name, labels)
    return False


def selector_matches(selector: NodeSelector, node_name: str | None, labels: Mapping[str, str]) -> bool:
    """nodeaffinity semantics; raises NodeSelectorError for selectors it cannot parse."""
    terms = selector.node_selector_terms
    # Parse every term first: nodeaffinity rejects the whole selector if any term is malformed.
    for term in terms:
        _check_term(term)
    if node_name is None:
        return False
    return any(_term_matches(term, node_name, labels) for term in terms)


def _check_term(term: NodeSelectorTerm) -> None:
    for req in term.match_expressions or ():
        _check_label_requirement(req)
    for req in term.match_fields or ():
        if req.key != NODE_NAME_FIELD:
            raise NodeSelectorError(f"matchFields key {req.key!r}: not a valid field selector key")
        if req.operator not in ("In", "NotIn"):
            raise NodeSelectorError(f"matchFields operator {req.operator!r} not supported: use In or NotIn")
        if len(req.values or ()) != 1:
            raise NodeSelectorError(f"matchFields {req.key} {req.operator}: must have exactly one value")


def _check_label_requirement(req: NodeSelectorRequirement) -> None:
    values = req.values or []
    if req.operator in ("In", "NotIn"):
        if not values:
            raise NodeSelectorError(
                f"{req.key} {req.operator}: for 'In', 'NotIn' operators, values set can't be empty"
            )
    elif req.operator in ("Exists", "DoesNotExist"):
        if values:
            raise NodeSelectorError(
                f"{req.key} {req.operator}: values set must be empty for exists and does not exist"
            )
    elif req.operator in ("Gt", "Lt"):
        if len(values) != 1 or _int64(values[0]) is None:
            raise NodeSelectorError(
                f"{req.key} {req.operator}: for 'Gt', 'Lt' operators, the value must be an integer"
            )
    else:
        raise NodeSelectorError(f"{req.key}: {req.operator!r} is not a valid label selector operator")


def _term_matches(term: NodeSelectorTerm, node_name: str, labels: Mapping[str, str]) -> bool:
    expressions = term.match_expressions or ()
    fields = term.match_fields or ()
    if not expressions and not fields:
        return False
    if not all(_label_requirement_matches(req, labels) for req in expressions):
        return False
    return all(_field_requirement_matches(req, node_name) for req in fields)


def _label_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    op = req.operator
    present = req.key in labels
    if op == "In":
        return present and labels[req.key] in (req.values or ())
    if op == "NotIn":
        return not present or labels[req.key] not in (req.values or ())
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    # Gt / Lt: the label must hold an int64 too.
    have = _int64(labels[req.key]) if present else None
    want = _int64((req.values or [""])[0])
    if have is None or want is None:
        return False
    return have > want if op == "Gt" else have < want


def _field_requirement_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    # _check_term made sure the key is metadata.name and there is one value.
    wanted = (req.values or [""])[0]
    return node_name == wanted if req.operator == "In" else node_name != wanted


@functools.lru_cache(maxsize=16384)
def pinned_to_node(node_name: str) -> NodeSelector:
    """``metadata.name In [node]``: the selector of a result that is only usable on one node.

    Cached: results of many claims on the same node share the (frozen) selector.
    """
    requirement = NodeSelectorRequirement(key=NODE_NAME_FIELD, operator="In", values=[node_name])
    return NodeSelector(node_selector_terms=[NodeSelectorTerm(match_fields=[requirement])])


class ResultSelectorBuilder:
    """Merges the node constraints of a claim's devices into one selector term.

    Any device pinned to a node (``nodeName`` or ``bindsToNode``) pins the whole result; one-term
    selectors have their requirements merged, skipping exact duplicates (same key, operator and set
    of values); ``allNodes`` adds nothing. No requirement at all means "usable everywhere".
    """

    def __init__(self, node_name: str) -> None:
        self._node_name = node_name
        self._pinned = False
        self._fields: list[NodeSelectorRequirement] = []
        self._expressions: list[NodeSelectorRequirement] = []

    @property
    def pinned(self) -> bool:
        """Whether a device pinned the result to the node: nothing added later changes it."""
        return self._pinned

    def add(self, *, node_name: str | None, binds_to_node: bool, selector: NodeSelector | None) -> None:
        """Fold in one device's node fields; raises NodeSelectorError for multi-term selectors."""
        if self._pinned:
            return
        if node_name is not None or binds_to_node:
            self._pinned = True
            return
        if selector is None:
            return
        terms = selector.node_selector_terms
        if len(terms) > 1:
            raise NodeSelectorError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        if terms:
            _merge(terms[0].match_fields or (), self._fields)
            _merge(terms[0].match_expressions or (), self._expressions)

    def build(self) -> NodeSelector | None:
        if self._pinned:
            return pinned_to_node(self._node_name)
        if not self._fields and not self._expressions:
            return None
        term: dict[str, list[NodeSelectorRequirement]] = {}
        if self._expressions:
            term["match_expressions"] = self._expressions
        if self._fields:
            term["match_fields"] = self._fields
        return NodeSelector(node_selector_terms=[NodeSelectorTerm(**term)])


def _merge(new: Iterable[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for req in new:
        values = set(req.values or ())
        if not any(
            old.key == req.key and old.operator == req.operator and set(old.values or ()) == values
            for old in into
        ):
            into.append(req)


def term_parses(term: NodeSelectorTerm) -> bool:
    """Whether nodeaffinity would parse the term."""
    try:
        _check_term(term)
    except NodeSelectorError:
        return False
    return True


def term_matches(term: NodeSelectorTerm, node_name: str, labels: Mapping[str, str]) -> bool:
    """Whether a term that parses matches the node."""
    return _term_matches(term, node_name, labels)


def lazy_selector_matches(selector: NodeSelector, node_name: str, labels: Mapping[str, str]) -> bool:
    """nodeaffinity's ``LazyErrorNodeSelector``: a term that does not parse is skipped, not fatal.

    The scheduler's NodeAffinity plugin matches a pod's node affinity this way ("ignore parsing
    errors for backwards compatibility"), unlike a claim's or slice's node selector.
    """
    return any(term_parses(t) and _term_matches(t, node_name, labels) for t in selector.node_selector_terms)
