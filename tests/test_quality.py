"""Lint and type checks run as part of the suite, so `.ci/run` fails on either.

mypy is strict on policies/ (the pure core, see pyproject.toml) and normal elsewhere.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["policies", "webhook", "certs"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_is_clean() -> None:
    done = run("ruff", "check", *PACKAGES, "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean() -> None:
    done = run("mypy", *PACKAGES)
    assert done.returncode == 0, done.stdout + done.stderr
