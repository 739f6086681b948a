"""``draguard`` commands run in the test's own process, through the ``main()`` the console script
calls, their exit code, stdout and stderr kept as a finished subprocess has them.

A fresh interpreter for every call imported draguard and the ``kubernetes`` client again each time
(a second or more apiece on a quiet 2-core machine, several under load), and the cluster tests that
use this are about what a command answers against the real API server, not about the process: the
console script itself is checked by ``tests/test_cli.py``, and ``draguard serve`` runs as a process
of its own wherever it is deployed (``deploy.py``).
"""

from __future__ import annotations

import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout

from webhook.cli import main


def draguard(*argv: str) -> subprocess.CompletedProcess[str]:
    """``draguard ARGV`` as :func:`subprocess.run` with ``capture_output=True, text=True`` reports it."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return subprocess.CompletedProcess(["draguard", *argv], code, out.getvalue(), err.getvalue())
