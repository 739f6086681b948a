"""Kubeconfig loading: the files kubectl would read, and one line (exit 2) for every problem, in
every command that reads a cluster."""

from __future__ import annotations

import http.server
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from webhook.cli import main
from webhook.kube import ConnectError, KubeError, check_reachable, connect, kubeconfig_paths

CONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "one",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:{port}"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [
        {"name": "one", "context": {"cluster": "c", "user": "u"}},
        {"name": "two", "context": {"cluster": "c", "user": "u"}},
    ],
}


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """``serve`` points the root logger at this test's stderr capture; put it back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write(tmp_path: Path, text: str, name: str = "kubeconfig") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def good(tmp_path: Path, **changes: object) -> str:
    config = {**CONFIG, **changes}
    text = yaml.safe_dump(config).replace("{port}", str(closed_port()))
    return write(tmp_path, text)


def test_paths_follow_kubectl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/a:/b::/c")
    assert kubeconfig_paths(None) == ["/a", "/b", "/c"]
    assert kubeconfig_paths("/x:y") == ["/x:y"]  # --kubeconfig names one file
    monkeypatch.setenv("KUBECONFIG", "")
    assert kubeconfig_paths(None) == [str(Path("~/.kube/config").expanduser())]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "apiVersion: v1\n---\napiVersion: v1\n",
            "must be one YAML document holding a Config, found 2 YAML documents",
        ),
        ("- a\n- b\n", "must be one YAML document holding a Config, found a list"),
        ("clusters: [unclosed\n", "not valid YAML: "),
    ],
)
def test_a_file_that_is_not_one_yaml_mapping(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConnectError, match="^kubeconfig .*kubeconfig: " + problem):
        connect(path, in_cluster=False)


def test_contexts(tmp_path: Path) -> None:
    path = good(tmp_path)
    connect(path, in_cluster=False, context="two")
    with pytest.raises(ConnectError) as missing:
        connect(path, in_cluster=False, context="three")
    assert str(missing.value) == f"kubeconfig {path}: no context named 'three' (contexts: one, two)"
    unset = good(tmp_path, **{"current-context": ""})
    with pytest.raises(ConnectError, match="no current-context is set: choose one with --context"):
        connect(unset, in_cluster=False)


def test_no_kubeconfig_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(ConnectError) as named:
        connect(None, in_cluster=False)
    # $KUBECONFIG is set: it is the thing to fix, not to set.
    absent = tmp_path / "absent"
    assert str(named.value) == f"no kubeconfig found: $KUBECONFIG names {absent}, which does not exist"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConnectError) as searched:
        connect(None, in_cluster=False)
    assert str(searched.value) == (
        f"no kubeconfig found at {tmp_path}/.kube/config: give --kubeconfig FILE or set $KUBECONFIG"
    )


def test_credentials_the_client_cannot_use_are_one_line(tmp_path: Path) -> None:
    path = good(tmp_path, users=[{"name": "u", "user": {"client-certificate": "/no/such.crt"}}])
    with pytest.raises(ConnectError) as failed:
        connect(path, in_cluster=False)
    assert "\n" not in str(failed.value) and str(failed.value).startswith(f"kubeconfig {path}: ")


@pytest.mark.parametrize(
    "command", [["audit"], ["serve", "--port", "0", "--metrics-port", "0", "--health-port", "0"]]
)
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("two documents", "must be one YAML document holding a Config, found 2 YAML documents"),
        ("missing context", "no context named 'gone' (contexts: one, two)"),
        ("unreachable", "cannot reach the API server at https://127.0.0.1:"),
    ],
)
def test_every_cluster_command_says_it_in_one_line_and_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str], case: str, expected: str
) -> None:
    path = (
        write(tmp_path, "apiVersion: v1\n---\napiVersion: v1\n")
        if case == "two documents"
        else good(tmp_path)
    )
    extra = ["--context", "gone"] if case == "missing context" else []
    code = main([*command, "--kubeconfig", path, *extra])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and expected in err, err


def test_serve_with_context_alone_reads_the_kubeconfig_env(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", good(tmp_path))
    code = main(["serve", "--context", "two", "--port", "0", "--metrics-port", "0", "--health-port", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("draguard serve: cannot reach the API server at https://127.0.0.1:"), err


class _Answer(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "refused"), [(200, False), (404, False), (403, False), (401, True)])
def test_a_server_that_answers_is_reachable_unless_it_refuses_the_credentials(
    tmp_path: Path, status: int, refused: bool
) -> None:
    handler = type("Handler", (_Answer,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = yaml.safe_dump(CONFIG).replace(
            "https://127.0.0.1:{port}", f"http://127.0.0.1:{server.server_port}"
        )
        api = connect(write(tmp_path, text), in_cluster=False)
        if refused:
            with pytest.raises(KubeError, match="HTTP 401"):
                check_reachable(api)
        else:
            check_reachable(api)
    finally:
        server.shutdown()
        server.server_close()
