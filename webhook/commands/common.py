"""The flags several commands share, defined once so that they read and behave the same everywhere.

``-o/--output`` with ``--no-color`` (every command that prints a result), ``--kubeconfig`` with
``--context`` (every command that can read a cluster). Each helper adds the flags to a command's
parser; the matching ``*_from`` function turns the parsed flags into what the command uses.
This module imports nothing heavy: ``draguard --help`` and shell completion build every parser.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from webhook.output import Style, style_for

TABLE_FORMATS = ("table", "json", "yaml")


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
