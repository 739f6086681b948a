"""The ``draguard`` entry point: parse the command line, run the command, turn interrupts into exit codes.

Only the command being run is imported (see :func:`webhook.commands.build_parser`), so that
``draguard --help`` answers at once and each command loads only what it needs.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from webhook.commands import SUMMARIES, build_parser

# The collector's thresholds while a command other than serve runs. Such a run reads its input,
# works and exits, and nearly everything it allocates (a parsed List, its models) lives until the
# end: with the default thresholds, the collector's repeated passes over those objects took over
# half of validating a 5 MB kubectl dump (8 s of CPU; 3.8 s with these). Cycles are still
# collected, just rarely.
BATCH_GC_THRESHOLDS = (100_000, 50, 100)
# serve's: a review's objects live until its answer (a million for a 3 MiB Pod), and the default
# 700 allocations between passes promoted those in flight to the oldest generation, whose full
# passes (over them and the CEL compile cache) stopped the server 94 times over 30 ms, up to 274 ms,
# in 10,000 requests of issue 16's fuzz; with (10_000, 20, 10), 33 times, up to 147 ms. Full
# passes are left to serve itself, which collects and freezes what is new every few seconds
# (commands/serve.py, _keep_frozen): a pass of its own walked the selector rule's 400,000 new
# device bindings in 300 ms at 5,000 nodes. Young cycles are still collected within 10,000
# allocations.
SERVE_GC_THRESHOLDS = (10_000, 20, 1_000)
# The exit status of a process killed by SIGPIPE (128 + 13), for a broken pipe met outside stdout.
BROKEN_PIPE = 141


class _Stdout:
    """stdout that outlives its reader: ``draguard validate -f bad.yaml | head -1`` closes the pipe
    after one line, and the next write fails. The command must still finish and exit with its own
    code (1 for invalid manifests, so that a CI step with ``pipefail`` fails), so a write or flush
    into a closed pipe points stdout at /dev/null (Python's ``signal`` module documentation's
    recipe) and carries on as if it had been read."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    # pydantic looks for plugins among every installed distribution's entry points when the first
    # model is built: 80 ms of a 0.5 s validate, for plugins (observability SDKs) draguard does not
    # use. PYDANTIC_DISABLE_PLUGINS set to anything, even empty, is the user's choice and is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    argv = list(sys.argv[1:] if argv is None else argv)
    # The command is the first word that is not a flag (the top-level flags take no value).
    command = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser([command] if command in SUMMARIES else [])
    args = parser.parse_args(argv)
    thresholds = gc.get_threshold()
    gc.set_threshold(*(SERVE_GC_THRESHOLDS if args.command == "serve" else BATCH_GC_THRESHOLDS))
    stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # A pipe other than stdout (a log on stderr read by head): the command could not finish.
        return BROKEN_PIPE
    finally:
        sys.stdout = stdout
        gc.set_threshold(*thresholds)
    return code


if __name__ == "__main__":
    sys.exit(main())
