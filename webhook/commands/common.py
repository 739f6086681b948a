"""The flags the commands share, defined once so that they read and behave the same everywhere.

Input: ``-f/--filename`` (repeatable, several paths each, ``-`` for stdin), ``-R/--recursive``,
``--api-versions`` (the API server's ``--runtime-config`` entries),
``--unknown-fields``, ``--skip-kinds``, ``--strict-kinds`` and ``--allow-privileged`` (the API
server's flag of that name); then one note per kind skipped, on stderr, as kubectl-style tools
print them. Output: ``-o/--output`` with ``--no-color`` (every command that prints a result).
Cluster: ``--kubeconfig`` with ``--context`` (every command that can read a cluster). Each
``add_*`` helper adds flags to a command's parser; the other functions turn the parsed flags into
what the command uses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from policies.api import runtimeconfig
from policies.api.conversion import CONVERTIBLE
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.api.runtimeconfig import RuntimeConfig
from policies.reading import CUSTOM_RESOURCE, NOT_CHECKED, UNKNOWN_FIELD_MODES, ReadOptions
from webhook.manifests import DefaultNamespace, Entry, read_entries, skipped_kinds
from webhook.output import Style, plural, style_for

if TYPE_CHECKING:
    from webhook.cluster import Cluster

TABLE_FORMATS = ("table", "json", "yaml")

OLDER_VERSIONS = sorted(CONVERTIBLE)


class UsageError(Exception):
    """An option value that cannot be used (exit code 2)."""


def add_file_flags(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="extend",
        nargs="+",
        required=required,
        metavar="FILE_OR_DIR",
        help="manifests: YAML or JSON files, directories, or - for stdin (repeatable; several per -f)",
    )
    parser.add_argument(
        "-R",
        "--recursive",
        action="store_true",
        help="read the directories given with -f recursively, as kubectl -R",
    )


def add_reading_flags(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--api-versions",
        default="",
        metavar="LIST",
        help="what your API server serves beyond 1.36's defaults: its --runtime-config entries, comma "
        "separated, GROUP/VERSION[=true|false] or GROUP/VERSION/RESOURCE[=true|false] (e.g. "
        "resource.k8s.io/v1beta2/devicetaintrules=true), with the server's precedence; objects of the "
        f"older versions ({', '.join(OLDER_VERSIONS)}) are converted to the version 1.36 stores and "
        "checked as that (default: none, as a default 1.36 API server)",
    )
    parser.add_argument(
        "--unknown-fields",
        choices=UNKNOWN_FIELD_MODES,
        default="error",
        help="fields the API does not have, and fields written twice: an error (kubectl's strict "
        "field validation), a warning, or ignored (default: error)",
    )
    parser.add_argument(
        "--skip-kinds",
        default="",
        metavar="LIST",
        help="kinds to skip without a note, comma separated (e.g. ConfigMap,ComputeDomain)",
    )
    parser.add_argument(
        "--strict-kinds",
        action="store_true",
        help="make documents of kinds draguard does not check errors instead of notes",
    )
    parser.add_argument(
        "--allow-privileged",
        nargs="?",
        const=True,
        default=True,
        type=parse_bool,
        metavar="true|false",
        help="privileged containers: accepted (the default, as kubeadm, kind and the managed "
        "clusters start kube-apiserver), or refused with =false, as kube-apiserver's own default does",
    )


def parse_bool(value: str) -> bool:
    """A boolean flag's value as kube-apiserver reads its own (``--allow-privileged=false``)."""
    try:
        return runtimeconfig.parse_bool(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _items(value: str) -> frozenset[str]:
    return frozenset(v.strip() for v in value.split(",") if v.strip())


def read_options(args: argparse.Namespace) -> ReadOptions:
    """The :class:`ReadOptions` of the flags; :class:`UsageError` for an entry of ``--api-versions``
    that kube-apiserver would refuse in its ``--runtime-config``, or that 1.36 has no version for."""
    try:
        versions = RuntimeConfig.parse(args.api_versions.split(","))
    except ValueError as err:
        raise UsageError(f"--api-versions {err}") from None
    return ReadOptions(
        api_versions=versions,
        unknown_fields=args.unknown_fields,
        skip_kinds=_items(args.skip_kinds),
        strict_kinds=args.strict_kinds,
        allow_privileged=args.allow_privileged,
    )


def read_inputs(
    args: argparse.Namespace, paths: Sequence[str] | None = None, namespace: DefaultNamespace | None = None
) -> list[Entry]:
    """The documents of ``-f`` (or ``paths``) read with the command's reading flags (and placed in
    ``namespace`` when they name none)."""
    files = args.files if paths is None else paths
    return read_entries(files, read_options(args), args.recursive, namespace=namespace)


def print_notes(entries: Sequence[Entry], out: TextIO) -> None:
    """One line per kind that was skipped (but for its metadata), saying why and how to silence
    or refuse it."""
    for kind, why in skipped_kinds(entries).items():
        if why == "--skip-kinds":
            continue
        count = sum(1 for e in entries if e.reading is not None and e.reading.kind == kind)
        documents = plural(count, f"{kind} document")
        if why in (NOT_CHECKED, CUSTOM_RESOURCE):
            print(
                f"note: {documents}: only the metadata checked, {why} (--skip-kinds {kind} to skip "
                "them silently, --strict-kinds to make them errors)",
                file=out,
            )
        else:
            print(f"note: skipped {documents}: {why} (--skip-kinds {kind} to silence this)", file=out)


# --- output and cluster ------------------------------------------------------------------------


def add_output(parser: argparse.ArgumentParser, formats: Sequence[str] = TABLE_FORMATS) -> None:
    """``-o/--output`` (the first format is the default, the one for a person) and ``--no-color``."""
    parser.add_argument(
        "-o",
        "--output",
        choices=formats,
        default=formats[0],
        metavar="FORMAT",
        help=f"{', '.join(formats)} (default: {formats[0]}); json and yaml hold every detail in full",
    )
    parser.add_argument(
        "--no-color",
        action="store_true",
        help="no colour even on a terminal (setting the NO_COLOR environment variable does the same)",
    )


def style(args: argparse.Namespace, stream: TextIO | None = None) -> Style:
    """The colours for ``stream`` (stdout by default) under the parsed ``--no-color``."""
    return style_for(stream if stream is not None else sys.stdout, args.no_color)


def add_namespace(parser: argparse._ActionsContainer) -> None:
    """``-n/--namespace``, as kubectl's: where documents that name no namespace go."""
    parser.add_argument(
        "-n",
        "--namespace",
        metavar="NAME",
        help="the namespace of documents that name none, as kubectl -n (default: with a cluster, its "
        "kubeconfig context's namespace, else default); a document naming another is refused, as "
        "kubectl refuses it",
    )


def wants_cluster(args: argparse.Namespace) -> bool:
    """Whether the command reads a cluster: only when ``--kubeconfig`` or ``--context`` is given (an
    offline run never reaches for ``~/.kube/config``)."""
    return bool(args.kubeconfig or args.context)


def default_namespace(args: argparse.Namespace, cluster: Cluster | None) -> DefaultNamespace | None:
    """Where documents naming no namespace go, as kubectl puts them: ``-n``; else, with a cluster,
    its context's namespace or ``default``; else nowhere (offline, an object without a namespace
    is left as written, and keyed under ``default``)."""
    if args.namespace:
        return DefaultNamespace(args.namespace, explicit=True)
    if cluster is None:
        return None
    return DefaultNamespace(cluster.context.namespace or DEFAULT_NAMESPACE)


def connect_cluster(args: argparse.Namespace) -> Cluster | None:
    """The cluster of ``--kubeconfig``/``--context`` (not yet asked anything), None when neither is
    given; :class:`UsageError` of one line when the kubeconfig cannot be used. The Kubernetes
    client is imported only then."""
    if not wants_cluster(args):
        return None
    from webhook.cluster import Cluster, ClusterError

    try:
        return Cluster.connect(args.kubeconfig, args.context)
    except ClusterError as err:
        raise UsageError(str(err)) from None


def add_cluster(parser: argparse._ActionsContainer, what: str) -> None:
    """``--kubeconfig FILE`` and ``--context NAME``; ``what`` says what the cluster is read for."""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"kubeconfig of the cluster to {what} (default: $KUBECONFIG, which may list several "
        "files separated by ':', else ~/.kube/config)",
    )
    parser.add_argument(
        "--context",
        metavar="NAME",
        help="the kubeconfig context to use (default: its current-context)",
    )
