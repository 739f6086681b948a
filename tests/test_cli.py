"""The ``draguard`` command line as a whole: what it imports, its help text, --version, completion,
and the flags every command shares."""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from webhook.cli import BATCH_GC_THRESHOLDS, SERVE_GC_THRESHOLDS, main
from webhook.commands import SUMMARIES, build_parser
from webhook.commands.completion import bash_script, zsh_script

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = str(ROOT / "examples" / "gpu-cluster")
HEAVY = (
    "kubernetes",
    "aiohttp",
    "prompt_toolkit",
    "typer",
    "rich",
    "celpy",
    "cryptography",
    "prometheus_client",
)


def loaded_after(*argv: str) -> set[str]:
    """The top-level packages, and draguard's own modules, a fresh interpreter has loaded after
    ``draguard ARGV`` (its output is discarded)."""
    script = (
        "import sys, io, contextlib\n"
        "from webhook.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        f"        main({list(argv)!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('\\n'.join(sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    names = done.stdout.split()
    return {n.split(".")[0] for n in names} | {n for n in names if n.startswith(("webhook.", "policies."))}


def test_help_imports_no_command() -> None:
    loaded = loaded_after("--help")
    assert not {m for m in loaded if m.startswith("webhook.commands.") and m != "webhook.commands.common"}
    assert not loaded & {"policies", "pydantic", "yaml", *HEAVY}


def test_validate_loads_neither_the_server_nor_the_cluster_client_nor_a_repl() -> None:
    loaded = loaded_after("validate", "-f", CLUSTER)
    assert "policies.validation" in loaded  # it did run
    assert not loaded & set(HEAVY)
    assert not {
        m for m in loaded if m.startswith("webhook.") and m.split(".")[1] in ("server", "kube", "state")
    }


def test_validate_of_dra_objects_loads_no_pod_validation_nor_scheduler() -> None:
    """Pods' and workloads' validation, the allocator and the scheduler are loaded where a pod is
    judged or a pod placed: a small validate of classes, slices and claims spent a fifth of its
    time importing them."""
    loaded = loaded_after("validate", "-f", CLUSTER)
    assert "policies.audit" in loaded  # the slices are there: the selector warnings ran
    unneeded = ("policies.validation.podspec", "policies.validation.workloads", "policies.allocator")
    assert not loaded & {*unneeded, "policies.scheduler", "policies.dryrun"}
    pods = loaded_after("validate", "-f", CLUSTER, str(ROOT / "examples" / "workloads"))
    assert "policies.validation.podspec" in pods


def test_audit_of_files_does_not_load_the_cluster_client() -> None:
    loaded = loaded_after("audit", "-f", CLUSTER)
    assert "policies.audit" in loaded and "kubernetes" not in loaded


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"draguard {version('draguard')}\n"


def _parsers(
    parser: argparse.ArgumentParser, path: str = "draguard"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _parsers(child, f"{path} {name}")
    return found


PARSERS = _parsers(build_parser())


def test_every_command_is_built_and_listed() -> None:
    assert [p for p, _ in PARSERS if p.count(" ") == 1] == [f"draguard {name}" for name in SUMMARIES]


@pytest.mark.parametrize(("path", "parser"), PARSERS, ids=[p for p, _ in PARSERS])
def test_every_flag_has_help_in_plain_words(path: str, parser: argparse.ArgumentParser) -> None:
    missing = [a.option_strings or a.dest for a in parser._actions if not a.help]
    assert missing == [], f"{path}: flags without help"
    text = parser.format_help()
    for markup in ("``", ":mod:", ":class:", ":func:", ":data:", ":meth:"):
        assert markup not in text, f"{path} --help shows {markup!r}"


@pytest.mark.parametrize(
    ("command", "formats"),
    [
        ("validate", ["table", "json", "yaml"]),
        ("allocate", ["table", "json", "yaml", "name"]),
        ("audit", ["table", "json", "yaml", "policyreport"]),
        ("test", ["table", "json", "yaml"]),
        ("certs generate", ["table", "json", "yaml"]),
    ],
)
def test_output_formats_are_the_same_words_everywhere(command: str, formats: list[str]) -> None:
    parser = dict(PARSERS)[f"draguard {command}"]
    output = next(a for a in parser._actions if "--output" in a.option_strings)
    assert (output.option_strings, list(output.choices or []), output.default) == (
        ["-o", "--output"],
        formats,
        "table",
    )
    assert any("--no-color" in a.option_strings for a in parser._actions)


def test_allocate_name_output_lists_the_nodes_each_pod_fits_on(capsys: pytest.CaptureFixture[str]) -> None:
    # No pending pod: the claims not yet allocated are asked about as one pod.
    assert main(["allocate", "-f", CLUSTER, "-o", "name"]) == 0
    assert capsys.readouterr().out == "team-a/dryrun node-2\n"
    assert main(["allocate", "-f", CLUSTER, "-f", str(ROOT / "examples" / "workloads"), "-o", "name"]) == 0
    assert capsys.readouterr().out == "team-a/inference node-3\n"


def test_validate_yaml_output_is_the_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    main(["validate", "-f", CLUSTER, "-o", "json"])
    as_json = json.loads(capsys.readouterr().out)
    main(["validate", "-f", CLUSTER, "-o", "yaml", "--no-color"])
    assert yaml.safe_load(capsys.readouterr().out) == as_json


# --- completion ----------------------------------------------------------------------------------


def complete(script: str, line: str) -> list[str]:
    """What bash offers for TAB at the end of ``line`` with ``script`` loaded."""
    words = line.split(" ")
    program = "\n".join(
        [
            script,
            f"COMP_WORDS=({' '.join(repr(w) for w in words)})",
            f"COMP_CWORD={len(words) - 1}",
            "_draguard",
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ]
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True, cwd=ROOT)
    return done.stdout.split()


@pytest.fixture(scope="module")
def script() -> str:
    return bash_script(build_parser())


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("draguard va", ["validate"]),
        ("draguard ", list(SUMMARIES)),
        ("draguard --", ["--help", "--version"]),
        ("draguard allocate -o ", ["table", "json", "yaml", "name"]),
        ("draguard audit --ku", ["--kubeconfig"]),
        ("draguard validate --no", ["--no-color"]),
        ("draguard certs ", ["generate"]),
        ("draguard certs generate --key-algorithm ecdsa", ["ecdsa-p256", "ecdsa-p384"]),
        ("draguard completion ", ["bash", "zsh"]),
        ("draguard validate -f exam", ["examples"]),
        ("draguard test exam", ["examples"]),
        ("draguard allocate --node ", []),
    ],
)
def test_bash_completion(script: str, line: str, offered: list[str]) -> None:
    assert sorted(complete(script, line)) == sorted(offered)


def test_zsh_completion_runs_the_bash_script_through_bashcompinit(script: str) -> None:
    text = zsh_script(build_parser())
    assert "bashcompinit" in text and text.endswith(script)


def test_completion_command_prints_the_script(capsys: pytest.CaptureFixture[str], script: str) -> None:
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == script


@pytest.mark.parametrize(
    ("argv", "function", "thresholds"),
    [
        (["validate", "-f", CLUSTER], "run", BATCH_GC_THRESHOLDS),
        (["serve", "--demo"], "serve_command", SERVE_GC_THRESHOLDS),
    ],
)
def test_the_collector_runs_less_often_in_a_command_and_its_thresholds_come_back(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], function: str, thresholds: tuple[int, int, int]
) -> None:
    module = importlib.import_module(f"webhook.commands.{argv[0]}")
    seen: list[tuple[int, ...]] = []
    monkeypatch.setattr(module, function, lambda args: seen.append(gc.get_threshold()) or 0)
    before = gc.get_threshold()
    assert before[0] < thresholds[0]
    assert main(argv) == 0
    assert seen == [thresholds]
    assert gc.get_threshold() == before


@pytest.mark.parametrize("output", ["table", "json"])
def test_a_reader_that_goes_away_does_not_turn_invalid_into_success(tmp_path: Path, output: str) -> None:
    """``draguard validate -f bad.yaml | head -1`` under ``pipefail`` must fail: the reader is gone
    before draguard writes (the read end is closed at once), yet the exit code is validate's own."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeNme: x, containers: []}\n")
    argv = ["validate", "-f", str(bad), "-o", output]
    script = f"import sys; from webhook.cli import main; sys.exit(main({argv!r}))"
    process = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    errors = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1, errors
    assert "Traceback" not in errors and "BrokenPipeError" not in errors
