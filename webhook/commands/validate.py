"""``draguard validate``: the API server's verdict on manifests, without a cluster.

Every document is read as a default Kubernetes 1.36 API server reads it (:mod:`policies.reading`:
strict decoding, older DRA versions refused or converted, workloads' pod templates checked as
pods, other kinds skipped with one note per kind), then each object is validated as the create
``kubectl apply`` would make (:mod:`policies.validation.documents`). One line per problem,
prefixed with where the object is and what it is, so that the output reads like kubectl's and can
be grepped::

    c.yaml: document 2: ResourceClaim team-a/big: spec.devices.requests[0].exactly.count: Invalid value:
    -1: must be greater than zero

(one line in the output, wrapped here).

Given ResourceSlices and DeviceClasses (a picture of the cluster), it also says what ``audit``
and the webhook would warn about the classes, claims and templates among them: selectors that
match no device, attribute names no device publishes (with the closest one), classes that do not
exist (``--strict`` fails on those).

Exit codes: 0 every object is valid, 1 any object is invalid or any file cannot be read (the
others are still checked), 2 nothing could be read at all, or bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from policies.api.base import TypedObject
from policies.api.core import Namespace
from policies.audit import selector_warnings
from policies.rules.registry import RULES
from policies.validation.documents import Identity, identity, judge
from webhook.commands.common import (
    UsageError,
    add_file_flags,
    add_reading_flags,
    print_notes,
    read_inputs,
)
from webhook.manifests import Entry


@dataclass
class Result:
    """What was found about one document, or about a file that could not be read (``kind`` and
    ``name`` empty, the problem naming the file)."""

    where: str
    kind: str
    name: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unreadable: bool = False

    @property
    def label(self) -> str:
        if self.unreadable:
            return "error"
        return f"{self.where}: {self.kind or '<no kind>'} {self.name or '<no name>'}"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check manifests against the API server's rules, DRA objects and workloads' pod templates",
        description="Validate manifests offline as a Kubernetes 1.36 API server would on kubectl apply: "
        "strict decoding, then the API server's validation of DRA objects and of pods and workloads' "
        "pod templates. Exit 0 when all are valid, 1 when any is invalid or a file cannot be read, "
        "2 when nothing could be read.",
    )
    add_file_flags(parser)
    parser.add_argument(
        "--old",
        dest="old",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE_OR_DIR",
        help="the objects as stored in the cluster: matching objects (same kind, "
        "namespace and name) are validated as updates of these",
    )
    parser.add_argument(
        "--namespace-labels",
        dest="namespace_labels",
        action="append",
        default=[],
        metavar="NS:KEY=VALUE[,KEY=VALUE]",
        help="labels of a namespace, for the adminAccess rule; Namespace objects in the input count as well",
    )
    add_reading_flags(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) on warnings too: selectors matching no device, misspelled attribute names",
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        labels = parse_namespace_labels(args.namespace_labels)
        entries = read_inputs(args)
        old_entries = read_inputs(args, args.old)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    read_any = any(e.reading is not None for e in entries)
    if not read_any:
        for entry in entries:
            print(f"error: {entry.problem}", file=sys.stderr)
        if not entries or all(e.problem is None for e in entries):
            print(f"error: no objects found in {', '.join(args.files)}", file=sys.stderr)
        return 2
    print_notes(entries, sys.stderr)
    results = check(entries, old_entries, labels, allow_privileged=args.allow_privileged)
    (print_json if args.output == "json" else print_text)(results, sys.stdout)
    failed = any(r.errors for r in results) or (args.strict and any(r.warnings for r in results))
    return 1 if failed else 0


def parse_namespace_labels(values: Sequence[str]) -> dict[str, dict[str, str]]:
    """``team-a:resource.kubernetes.io/admin-access=true,env=prod`` -> {"team-a": {...}}."""
    result: dict[str, dict[str, str]] = {}
    for value in values:
        namespace, sep, pairs = value.partition(":")
        if not sep or not namespace:
            raise UsageError(f"--namespace-labels {value!r}: expected NAMESPACE:KEY=VALUE[,KEY=VALUE]")
        labels = result.setdefault(namespace, {})
        for pair in filter(None, pairs.split(",")):
            key, eq, label = pair.partition("=")
            if not eq or not key:
                raise UsageError(f"--namespace-labels {value!r}: {pair!r} is not KEY=VALUE")
            labels[key] = label
    return result


def _stored(entries: Sequence[Entry]) -> dict[Identity, TypedObject]:
    found: dict[Identity, TypedObject] = {}
    for entry in entries:
        key = identity(entry.reading) if entry.reading is not None else None
        if key is not None and entry.reading is not None and entry.reading.obj is not None:
            found[key] = entry.reading.obj
    return found


def check(
    entries: Sequence[Entry],
    old_entries: Sequence[Entry],
    given_labels: Mapping[str, dict[str, str]],
    *,
    allow_privileged: bool = False,
) -> list[Result]:
    """A result per document checked and per file that could not be read; objects in --old files
    only serve as the stored versions, unchecked."""
    olds = _stored(old_entries)
    namespaces = {
        e.reading.obj.name: e.reading.obj.metadata.labels or {}
        for e in [*old_entries, *entries]
        if e.reading is not None and isinstance(e.reading.obj, Namespace)
    }
    namespaces.update(given_labels)
    checked = [e for e in entries if e.reading is None or e.reading.skipped is None]
    objects = [e.reading.obj for e in checked if e.reading is not None and e.reading.obj is not None]
    warned = iter(selector_warnings(objects, RULES, datetime.now(UTC)))
    results = []
    for entry in checked:
        reading = entry.reading
        if reading is None:
            results.append(Result(entry.where, "", "", [entry.problem or ""], unreadable=True))
            continue
        result = Result(entry.where, reading.kind, _shown_name(reading.namespace, reading.name))
        result.errors = list(reading.errors)
        result.warnings = list(reading.warnings)
        if reading.obj is not None:
            key = identity(reading)
            namespace = key[2] if key is not None else reading.namespace
            old = olds.get(key) if key else None
            labels = namespaces.get(namespace)
            result.errors += judge(reading, old, labels, allow_privileged=allow_privileged)
            prefix = f"{reading.kind} {result.name}: "
            result.warnings += [w.removeprefix(prefix) for w in next(warned)]
        results.append(result)
    return results


def _shown_name(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace and name else name


def _summary(results: Sequence[Result]) -> dict[str, int]:
    documents = [r for r in results if not r.unreadable]
    invalid = sum(1 for r in documents if r.errors)
    return {
        "objects": len(documents),
        "valid": len(documents) - invalid,
        "invalid": invalid,
        "problems": sum(len(r.errors) for r in documents),
        "warnings": sum(len(r.warnings) for r in documents),
        "unreadable": len(results) - len(documents),
    }


def print_text(results: Sequence[Result], out: TextIO) -> None:
    for result in results:
        for warning in result.warnings:
            print(f"{result.label}: warning: {warning}", file=out)
        for error in result.errors:
            # A CEL compile error spans lines (the expression and a caret); keep them under their problem.
            print(f"{result.label}: {error}".replace("\n", "\n    "), file=out)
    s = _summary(results)
    line = f"{s['objects']} objects: {s['valid']} valid, {s['invalid']} invalid ({s['problems']} problems"
    line += f", {s['warnings']} warnings)" if s["warnings"] else ")"
    if s["unreadable"]:
        line += f"; {s['unreadable']} {'file' if s['unreadable'] == 1 else 'files'} could not be read"
    print(line, file=out)


def print_json(results: Sequence[Result], out: TextIO) -> None:
    body = {
        "objects": [
            {
                "source": r.where,
                "kind": r.kind,
                "name": r.name,
                "valid": not r.errors,
                "problems": r.errors,
                "warnings": r.warnings,
            }
            for r in results
            if not r.unreadable
        ],
        "unreadable": [r.errors[0] for r in results if r.unreadable],
        "summary": _summary(results),
    }
    json.dump(body, out, indent=2)
    out.write("\n")
