"""``draguard convert``: older ``resource.k8s.io`` objects rewritten in the version 1.36 serves.

In the shape of ``kubectl convert``: the documents of ``-f`` are printed again, the ones in
v1beta1 or v1beta2 (and v1alpha3 DeviceTaintRules) converted field by field as the 1.36 API server
converts them (:mod:`policies.api.conversion`: v1beta1's flat request fields move under
``exactly``, a device's ``basic`` fields up into the device), every other document unchanged, so
that the output can replace the input. A document that strict decoding refuses in its own version
is not converted: its problems go to stderr.

Exit codes: 0 everything printed, 1 some document could not be converted or some file not read,
2 nothing could be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from policies.api.conversion import CONVERTIBLE, GROUP, V1, convert
from policies.api.runtimeconfig import RuntimeConfig
from policies.reading import ReadOptions, read
from webhook.commands import add_command
from webhook.commands.common import add_file_flags, add_output
from webhook.manifests import Document, Unreadable, iter_inputs
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


def _as_is(raw: Any) -> bool:
    """A Kubernetes object that is not in an older resource.k8s.io version: printed unchanged.
    Anything else is read first: what is no object, or in a version nothing converts from
    (classic DRA's v1alpha2), is refused with the reader's reason, as kubectl convert refuses it."""
    if not isinstance(raw, dict):
        return False
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if not (isinstance(api_version, str) and api_version and isinstance(kind, str) and kind):
        return False
    return not api_version.startswith(f"{GROUP}/") or api_version == V1


def _converted(doc: Document) -> tuple[Any, list[str]]:
    """The document in the version 1.36 serves, or unchanged; and why it cannot be converted."""
    raw = doc.raw
    if _as_is(raw):
        return raw, []
    reading = read(raw, _ALL_VERSIONS)
    if reading.errors:
        return None, [f"{doc.source}: {reading.label}: {e}" for e in reading.errors]
    if reading.skipped is not None:
        return raw, []
    return convert(raw), []


def run(args: argparse.Namespace) -> int:
    out: list[Any] = []
    problems: list[str] = []
    read_any = False
    items = list(iter_inputs(args.files, args.recursive))
    with Progress("convert") as progress:
        for done, item in enumerate(items, start=1):
            progress(done, len(items))
            if isinstance(item, Unreadable):
                problems.append(item.message)
                continue
            read_any = True
            converted, found = _converted(item)
            problems += found
            if not found:
                # Plain JSON values: a document read with a repeated key is a dict subclass.
                out.append(json.loads(json.dumps(converted)))
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if not read_any:
        return 2
    if args.output == "json":
        body = out[0] if len(out) == 1 else {"apiVersion": "v1", "kind": "List", "items": out}
        dump(body, "json", sys.stdout)
    else:
        dump_all(out, sys.stdout)
    return 1 if problems else 0
