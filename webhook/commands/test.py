"""``draguard test PATH...``: run policy test suites offline and say which expectations hold.

A suite is a YAML file with a top-level ``tests:`` key (see :mod:`policies.testsuite` for the
format and what each expectation means). PATH is a suite file or a directory: every ``*.yaml``
under it with a top-level ``tests:`` key, and every file named ``draguard-test.yaml``, is a suite.
File names inside a suite (``config``, ``state``, ``object``, ``allocate``...) are relative to it.

Exit codes: 0 every test passed, 1 some test failed, 2 a suite is broken (the message names the
file and the field); no test runs when any suite is broken.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from policies.rules.registry import RULES
from policies.testsuite import (
    CaseResult,
    PreparedSuite,
    Reader,
    SuiteError,
    SuiteResult,
    parse_suite,
    prepare,
    run_suite,
)
from webhook.manifests import ManifestError, load, read_documents
from webhook.tables import render

SUITE_FILE = "draguard-test.yaml"
_SUITE_SUFFIXES = (".yaml", ".yml")
_TESTS_KEY = re.compile(r"^tests\s*:", re.MULTILINE)
# A table row's reason is cut here; failures are printed in full below the table.
REASON_WIDTH = 72


class BrokenSuite(Exception):
    """Suites that cannot run: one ``file: field: problem`` line each (exit code 2)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "test",
        help="run policy test suites: objects and the answers draguard should give for them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
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
        if len(docs) != 1:
            raise SuiteError([f"<root>: holds {len(docs)} YAML documents; a suite is one"])
        suite = parse_suite(docs[0].raw)
        state = [x.obj for x in load([os.path.join(base, p) for p in suite.state])] if suite.state else []
        return prepare(suite, state, _reader(base), now)
    except ManifestError as err:
        raise BrokenSuite(f"{file}: {err}") from None
    except SuiteError as err:
        raise BrokenSuite("\n".join(f"{file}: {p}" for p in err.problems)) from None


# --- reporting -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    file: str
    result: SuiteResult


def _short(text: str, width: int = REASON_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def table(runs: Sequence[Ran]) -> str:
    rows = [("SUITE", "TEST", "RESULT", "REASON")]
    for ran in runs:
        rows += [
            (ran.result.name, r.name, "pass" if r.passed else "FAIL", _short(r.reason))
            for r in ran.result.results
        ]
    failures = [
        f"FAIL {ran.result.name} / {r.name} ({ran.file})\n  {r.reason}"
        for ran in runs
        for r in ran.result.results
        if not r.passed
    ]
    return "\n".join([render(rows), *(["", *failures] if failures else [])])


def summary(runs: Sequence[Ran]) -> str:
    passed = sum(r.result.passed for r in runs)
    failed = sum(r.result.failed for r in runs)
    return f"{passed} passed, {failed} failed"


def _result_json(result: CaseResult) -> dict[str, Any]:
    verdict = "pass" if result.passed else "fail"
    return {"name": result.name, "result": verdict, "reason": result.reason, "actual": result.actual}


def to_json(runs: Sequence[Ran]) -> dict[str, Any]:
    return {
        "suites": [
            {
                "name": ran.result.name,
                "file": ran.file,
                "passed": ran.result.passed,
                "failed": ran.result.failed,
                "tests": [_result_json(r) for r in ran.result.results],
            }
            for ran in runs
        ],
        "passed": sum(r.result.passed for r in runs),
        "failed": sum(r.result.failed for r in runs),
    }


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
    runs = [Ran(file, run_suite(suite, RULES)) for file, suite in prepared]
    if args.junit:
        try:
            junit(runs).write(args.junit, encoding="utf-8", xml_declaration=True)
        except OSError as err:
            print(f"error: --junit {args.junit}: cannot write: {err}", file=sys.stderr)
            return 2
    if args.output == "json":
        print(json.dumps(to_json(runs), indent=2))
    else:
        print(table(runs))
        print(summary(runs))
    return 0 if all(r.result.failed == 0 for r in runs) else 1
