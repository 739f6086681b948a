"""``draguard`` command line: one subcommand per module in :mod:`webhook.commands`.

Each command module exposes ``register(subparsers)`` and sets ``func`` on its parser; the function
returns the process exit code. Exit codes follow one convention across commands: 0 success,
1 a policy/validation/allocation answer of "no", 2 input that cannot be used at all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS = ("validate", "allocate", "convert", "certs", "test", "audit", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="draguard",
        description="Guard rails for Kubernetes Dynamic Resource Allocation (DRA).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"webhook.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
