"""``draguard test PATH...``: run policy test suites offline and say which expectations hold.

What the command does, for its users, is :data:`DESCRIPTION` (``draguard test --help``); the suite
format and what each expectation means are in :mod:`policies.testsuite`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from policies.api.base import TypedObject
from policies.outputs import TestCaseResult, TestReport, TestSuiteResult
from policies.rules.registry import RULES
from policies.testsuite import (
    PreparedSuite,
    Reader,
    Suite,
    SuiteError,
    SuiteResult,
    parse_suite,
    prepare,
    run_suite,
)
from webhook.commands import add_command
from webhook.commands.common import add_output, style
from webhook.manifests import ManifestError, load, read_documents
from webhook.output import Progress, Table, dump, terminal_width

DESCRIPTION = """\
Run policy test suites offline: objects, and the answers draguard should give for them.

A suite is a YAML file with a top-level 'tests:' key. PATH is a suite file or a directory, in which
every *.yaml file with a top-level 'tests:' key, and every file named draguard-test.yaml, is a
suite. File names inside a suite (config, state, object, allocate...) are relative to it. The
README's "Policy tests" section describes the format.

Exit codes: 0 every test passed, 1 some test failed, 2 a suite is broken (the message names the
file and the field); no test runs when any suite is broken."""
SUITE_FILE = "draguard-test.yaml"
_SUITE_SUFFIXES = (".yaml", ".yml")
_TESTS_KEY = re.compile(r"^tests\s*:", re.MULTILINE)


class BrokenSuite(Exception):
    """Suites that cannot run: one ``file: field: problem`` line each (exit code 2)."""


def register(sub: Any) -> None:
    p = add_command(sub, "test", DESCRIPTION)
    p.add_argument("paths", nargs="*", metavar="PATH", help="a suite file or a directory of suites")
    p.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="extend",
        default=[],
        nargs="+",
        metavar="PATH",
        help="suite files or directories, as PATH (repeatable; several per -f)",
    )
    add_output(p)
    p.add_argument("--junit", metavar="FILE", help="also write the results as a JUnit XML report")
    p.set_defaults(func=run)


# --- finding and loading suites ------------------------------------------------------------------


def _is_suite(path: str) -> bool:
    if os.path.basename(path) == SUITE_FILE:
        return True
    try:
        with open(path, encoding="utf-8") as fh:
            return bool(_TESTS_KEY.search(fh.read()))
    except (OSError, UnicodeDecodeError):
        return False


def discover(paths: Sequence[str]) -> list[str]:
    """The suite files named by ``paths`` (a file is taken as given, a directory is searched)."""
    found: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
            continue
        if not os.path.isdir(path):
            raise BrokenSuite(f"{path}: no such file or directory")
        suites = [
            os.path.join(root, name)
            for root, dirs, names in sorted(os.walk(path))
            for name in sorted(names)
            if name.endswith(_SUITE_SUFFIXES) and _is_suite(os.path.join(root, name))
        ]
        if not suites:
            raise BrokenSuite(
                f"{path}: no test suites here (a suite is a *.yaml file with a top-level tests: key, "
                f"or a file named {SUITE_FILE})"
            )
        found += suites
    return list(dict.fromkeys(found))


def _reader(base: str) -> Reader:
    def read(name: str) -> list[Any]:
        try:
            return [doc.raw for doc in read_documents([os.path.join(base, name)])]
        except ManifestError as err:
            raise SuiteError([str(err)]) from None

    return read


def load_suite(file: str, now: datetime) -> PreparedSuite:
    """Parse, check and prepare one suite; raises :class:`BrokenSuite` naming the file and fields."""
    base = os.path.dirname(file)
    try:
        docs = read_documents([file])
    except ManifestError as err:
        raise BrokenSuite(str(err)) from None  # it names the file already
    try:
        if len(docs) != 1:
            raise SuiteError([f"<root>: holds {len(docs)} YAML documents; a suite is one"])
        suite = parse_suite(docs[0].raw)
        return prepare(suite, _state(suite, base, file), _reader(base), now)
    except SuiteError as err:
        raise BrokenSuite("\n".join(f"{file}: {p}" for p in err.problems)) from None


def _state(suite: Suite, base: str, file: str) -> list[TypedObject]:
    """The objects of the suite's ``state:``; :class:`SuiteError` with each problem under ``state``."""
    paths = [os.path.join(base, p) for p in suite.state]
    try:
        return [x.obj for x in load(paths, say=lambda line: _say(file, line))] if suite.state else []
    except ManifestError as err:
        raise SuiteError([f"state: {line}" for line in str(err).splitlines()]) from None


def _say(file: str, line: str) -> None:
    """A note or warning about a suite's state (``warning: where: ...``), naming the suite."""
    word, _, rest = line.partition(": ")
    print(f"{word}: {file}: state: {rest}", file=sys.stderr)


# --- reporting -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    file: str
    result: SuiteResult


def table(runs: Sequence[Ran]) -> Table:
    """One row per test; the failures' reasons are cut to the row and repeated by :func:`failures`."""
    rows = [
        (ran.result.name, r.name, "pass" if r.passed else "FAIL", r.reason)
        for ran in runs
        for r in ran.result.results
    ]
    return Table(("SUITE", "TEST", "RESULT", "REASON"), rows)


def failures(runs: Sequence[Ran]) -> list[str]:
    """Each failed test in full, under the table."""
    return [
        f"FAIL {ran.result.name} / {r.name} ({ran.file})\n  {r.reason}"
        for ran in runs
        for r in ran.result.results
        if not r.passed
    ]


def summary(runs: Sequence[Ran]) -> str:
    passed = sum(r.result.passed for r in runs)
    failed = sum(r.result.failed for r in runs)
    return f"{passed} passed, {failed} failed"


def to_json(runs: Sequence[Ran]) -> dict[str, Any]:
    """The ``TestReport`` document (:mod:`policies.outputs`)."""
    return TestReport(
        suites=[
            TestSuiteResult(
                name=ran.result.name,
                file=ran.file,
                passed=ran.result.passed,
                failed=ran.result.failed,
                tests=[
                    TestCaseResult(
                        name=r.name,
                        result="pass" if r.passed else "fail",
                        reason=r.reason,
                        actual=dict(r.actual),
                    )
                    for r in ran.result.results
                ],
            )
            for ran in runs
        ],
        passed=sum(r.result.passed for r in runs),
        failed=sum(r.result.failed for r in runs),
    ).to_json()


def junit(runs: Sequence[Ran]) -> ET.ElementTree[ET.Element]:
    """The results as JUnit XML (the format CI systems read): one testsuite per suite file."""
    root = ET.Element(
        "testsuites",
        name="draguard",
        tests=str(sum(len(r.result.results) for r in runs)),
        failures=str(sum(r.result.failed for r in runs)),
        errors="0",
    )
    for ran in runs:
        suite = ET.SubElement(
            root,
            "testsuite",
            name=ran.result.name,
            file=ran.file,
            tests=str(len(ran.result.results)),
            failures=str(ran.result.failed),
            errors="0",
            skipped="0",
        )
        for result in ran.result.results:
            case = ET.SubElement(
                suite, "testcase", name=result.name, classname=ran.result.name, file=ran.file
            )
            if result.passed:
                ET.SubElement(case, "system-out").text = result.reason
            else:
                ET.SubElement(case, "failure", message=result.reason, type="expectation").text = result.reason
    return ET.ElementTree(root)


def run(args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    try:
        if not args.paths and not args.files:
            raise BrokenSuite("give the suites to run: draguard test PATH... (or -f PATH...)")
        files = discover([*args.paths, *args.files])
    except BrokenSuite as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    prepared: list[tuple[str, PreparedSuite]] = []
    broken: list[str] = []
    for file in files:
        try:
            prepared.append((file, load_suite(file, now)))
        except BrokenSuite as err:
            broken.append(str(err))
    if broken:
        print("\n".join(f"error: {line}" for b in broken for line in b.splitlines()), file=sys.stderr)
        return 2
    runs: list[Ran] = []
    with Progress("test") as progress:
        for file, suite in prepared:
            runs.append(Ran(file, run_suite(suite, RULES)))
            progress(len(runs), len(prepared))
    if args.junit:
        try:
            junit(runs).write(args.junit, encoding="utf-8", xml_declaration=True)
        except OSError as err:
            print(f"error: --junit {args.junit}: cannot write: {err}", file=sys.stderr)
            return 2
    if args.output != "table":
        dump(to_json(runs), args.output, sys.stdout)
    else:
        # The reasons of failures are printed in full below, so a cut one needs no note.
        print(table(runs).render(terminal_width(sys.stdout), style(args)))
        for failure in failures(runs):
            print(f"\n{failure}")
        print(summary(runs))
    return 0 if all(r.result.failed == 0 for r in runs) else 1
