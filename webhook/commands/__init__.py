"""The subcommands of ``draguard``, one module each, and the parser that holds them.

Each module has ``register(subparsers)``, which adds its parser (with ``func`` set to the function
that runs it and returns the exit code), and imports what its command needs. Building the parser
imports only the modules asked for: ``draguard --help`` lists every command from :data:`SUMMARIES`
alone, and ``draguard validate`` never loads the webhook server.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection
from typing import Any

# name -> the one-line summary `draguard --help` shows; the modules use the same text.
SUMMARIES = {
    "validate": "check manifests with the API server's validation rules, without a cluster",
    "allocate": "would the pending pods fit: on which nodes, with which devices, and why not elsewhere",
    "devices": "what is free where: devices per pool and DeviceClass, allocated, free and tainted",
    "headroom": "how many more copies of a pod fit, where they would go, and what stops the next one",
    "audit": "check the objects of a cluster (or of manifests) against the rules, and its DRA health",
    "convert": "print older resource.k8s.io objects (v1beta1, v1beta2) converted to resource.k8s.io/v1",
    "test": "run policy test suites: objects and the answers draguard should give for them",
    "serve": "run the admission webhook (HTTPS), with metrics and the dry-run endpoint",
    "certs": "make TLS certificates for the webhook",
    "completion": "print a shell completion script (bash or zsh)",
}
DESCRIPTION = (
    "Guard rails for Kubernetes Dynamic Resource Allocation (DRA): check manifests, dry-run "
    "allocations, audit a cluster and run the admission webhook. "
    "Exit codes: 0 success, 1 the answer is no (invalid, does not fit, findings), 2 input that "
    "cannot be used."
)


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print draguard's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("draguard")
        except PackageNotFoundError:  # run from a source tree that was never installed
            found = "(not installed)"
        sys.stdout.write(f"draguard {found}\n")
        parser.exit()


def add_command(subparsers: Any, name: str, description: str) -> argparse.ArgumentParser:
    """The parser of command ``name``: its summary from :data:`SUMMARIES`, and ``description``
    printed as written (line breaks and examples kept)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=SUMMARIES[name],
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def build_parser(full: Collection[str] = SUMMARIES) -> argparse.ArgumentParser:
    """The ``draguard`` parser; the commands in ``full`` get their flags, the others only their name
    and summary (enough for ``draguard --help``, never parsed)."""
    parser = argparse.ArgumentParser(prog="draguard", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        required=True,
        help="one of these ('draguard COMMAND --help' describes each)",
    )
    for name, summary in SUMMARIES.items():
        if name in full:
            importlib.import_module(f"webhook.commands.{name}").register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser
