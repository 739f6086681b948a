"""The README's first five minutes: two Quick start commands, the second one being what CI runs, and
no paths that a reader of the README does not have."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from webhook.commands import SUMMARIES, build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def quick_start() -> list[str]:
    section = README.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1).strip().splitlines()


def test_quick_start_is_install_and_demo_then_install_and_tests() -> None:
    demo, tests = quick_start()
    assert demo.startswith("python3 -m venv .venv && .venv/bin/pip install") and demo.endswith(
        "draguard serve --demo"
    )
    assert tests.startswith("python3 -m venv .venv && .venv/bin/pip install") and tests.endswith(
        ".venv/bin/python -m pytest"
    )
    # A user's command, not a developer's workaround: one install, then the one thing it is for.
    assert demo.count("pip install") == 1 and tests.count("pip install") == 1
    assert "--ignore-requires-python" not in demo + tests


def test_ci_runs_exactly_the_second_command() -> None:
    # What comes before it only finds the Kubernetes binaries the end-to-end tests start.
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert script[-1] == quick_start()[1]
    assert sum("pytest" in line for line in script) == 1


def test_no_path_outside_the_repository() -> None:
    # `state: [../gpu-cluster]` in the suite example is relative to the suite file, inside the repo.
    assert re.findall(r"`(\.\./[^`]*)`", README) == []
    assert "/work/" not in README


def _parser_of(words: list[str]) -> argparse.ArgumentParser:
    """The parser of ``draguard WORD [ACTION]`` (``certs generate``), as the command line builds it."""
    parser = build_parser([words[1]])
    for word in words[1:3]:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            break
        parser = sub.choices[word]
    return parser


def test_every_command_line_shown_takes_the_flags_and_outputs_shown() -> None:
    """Each `draguard ...` in the README: its flags exist on that command, and a synopsis's
    `[-o A|B]` lists exactly the formats the command offers (the README is read before --help)."""
    lines = [span.replace("\\|", "|") for span in re.findall(r"`(draguard [^`]*)`", README)]
    assert len(lines) > 10
    for line in lines:
        words = line.split()
        parser = build_parser([]) if words[1].startswith("-") else _parser_of(words)
        options = {flag: action for action in parser._actions for flag in action.option_strings}
        for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line):
            assert flag in options, f"{line}: {flag} is not a flag of {parser.prog}"
        shown = re.search(r"\[-o ([\w|]+)\]", line)
        if shown:
            assert set(shown.group(1).split("|")) == set(options["-o"].choices or ()), line


def _options(parser: argparse.ArgumentParser, prog: str) -> list[tuple[str, list[str]]]:
    """``(command, spellings)`` of every option of ``parser`` and its subcommands but --help."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, f"{prog} {name}")
        elif action.option_strings and "--help" not in action.option_strings:
            found.append((prog, action.option_strings))
    return found


def test_every_option_in_help_is_in_the_readme() -> None:
    """What ``--help`` offers, the README says too (issue 28: twenty options were only in --help)."""
    options = []
    for command in SUMMARIES:
        parser = _parser_of(["draguard", command])
        options += _options(parser, command)
    assert len(options) > 50
    missing = [f"{prog} {spellings[-1]}" for prog, spellings in options
               if not any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", README) for s in spellings)]
    assert missing == []


def test_the_architecture_points_only_inside_the_repository() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert re.findall(r"`(\.\./[^`]*)`", text) == [] and "/work/" not in text


def test_the_answers_shown_are_what_the_commands_print(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ```console block: ``$ draguard ...`` and what it prints, as a user sees it."""
    from webhook.cli import main

    shown = re.findall(r"```console\n\$ (draguard [^\n]*)\n(.*?)```", README, re.DOTALL)
    assert {command.split()[1] for command, _ in shown} >= {"devices", "headroom"}
    monkeypatch.chdir(ROOT)
    for command, printed in shown:
        main(command.split()[1:])
        assert capsys.readouterr().out.rstrip() == printed.rstrip(), command
