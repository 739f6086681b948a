"""``draguard convert``: older ``resource.k8s.io`` objects rewritten in the version 1.36 serves.

In the shape of ``kubectl convert``: the documents of ``-f`` are printed again, the ones in
v1beta1 or v1beta2 (and v1alpha3 DeviceTaintRules) converted field by field as the 1.36 API server
converts them (:mod:`policies.api.conversion`: v1beta1's flat request fields move under
``exactly``, a device's ``basic`` fields up into the device), every other document unchanged, so
that the output can replace the input. Every document is read as the other commands read it
(:func:`webhook.manifests.entries_of`: strict decoding in its own version, kinds and versions
1.36 does not serve, the same object twice), with every older version counted as served, since
converting them is the point; a document that reading refuses is not printed, and its problems
go to stderr. A v1beta2 DeviceTaintRule is already in the version 1.36 serves it in (there is no
v1 yet): it is printed unchanged.

Exit codes: 0 everything printed, 1 some document could not be converted or some file not read,
2 nothing could be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from policies.api.conversion import CONVERTIBLE, convert, target_version
from policies.api.runtimeconfig import RuntimeConfig
from policies.reading import Reading, ReadOptions
from webhook.commands import add_command
from webhook.commands.common import add_file_flags, add_output
from webhook.manifests import Document, applied_twice, duplicated, entries_of, iter_inputs, problems
from webhook.output import Progress, dump, dump_all

DESCRIPTION = """\
Print the manifests again with their resource.k8s.io v1beta1 and v1beta2 objects (and v1alpha3
DeviceTaintRules) converted field by field as a Kubernetes 1.36 API server converts them, like
'kubectl convert': a v1beta1 request's deviceClassName, selectors, count and the like move under
exactly:, a device's basic: fields up into the device. Other documents are printed as they are.

Exit codes: 0 everything was printed, 1 a document could not be converted or a file read, 2
nothing could be read."""

# Every older version counts as served here: converting it is the point.
_ALL_VERSIONS = ReadOptions(api_versions=RuntimeConfig.parse(CONVERTIBLE), unknown_fields="error")


def register(sub: Any) -> None:
    p = add_command(sub, "convert", DESCRIPTION)
    add_file_flags(p)
    add_output(p, ("yaml", "json"))
    p.set_defaults(func=run)


def _converted(raw: Any, reading: Reading) -> Any:
    """The document in the version 1.36 serves it in, as plain JSON values (a document read with a
    key written twice is a dict subclass)."""
    if target_version(reading.api_version, reading.kind) is not None:
        raw = convert(raw)
    return json.loads(json.dumps(raw))


def run(args: argparse.Namespace) -> int:
    items = list(iter_inputs(args.files, args.recursive))
    entries = entries_of(items, _ALL_VERSIONS)
    out: list[Any] = []
    with Progress("convert") as progress:
        for done, (item, entry) in enumerate(zip(items, entries, strict=True), start=1):
            progress(done, len(items))
            if isinstance(item, Document) and entry.reading is not None and not entry.reading.errors:
                out.append(_converted(item.raw, entry.reading))
    found = problems(entries)
    for line in found:
        print(f"error: {line}", file=sys.stderr)
    # Both are printed, as kubectl apply applies both (validate warns the same way).
    for later, earlier in duplicated(entries):
        print(f"warning: {later.label}: {applied_twice(later, earlier)}", file=sys.stderr)
    if not any(isinstance(item, Document) for item in items):
        return 2
    if args.output == "json":
        body = out[0] if len(out) == 1 else {"apiVersion": "v1", "kind": "List", "items": out}
        dump(body, "json", sys.stdout)
    else:
        dump_all(out, sys.stdout)
    return 1 if found else 0
