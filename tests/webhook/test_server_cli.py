"""``draguard serve`` options, config file and certificate set-up: exit 2 with a message naming the
problem, before anything listens."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import ipaddress
import logging
import os
import platform
import ssl
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography import x509

from certs.material import generate_ca, issue_serving
from policies.api.core import Node
from policies.config import Config
from policies.quota import LedgerUnavailable
from policies.snapshot import Snapshot
from webhook.cli import main
from webhook.commands import serve
from webhook.commands.serve import (
    MALLOC_SETTINGS,
    UsageError,
    _keep_frozen,
    certificates,
    generate_pair,
    load_config,
    tune_malloc,
)

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples" / "gpu-cluster")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """``serve`` configures the process's logging, with a root handler on the stderr of the moment:
    here, this test's capture stream. Left in place, every later record in the run would be written
    to that closed stream ("--- Logging error ---" in other tests' output)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["serve", *args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "say where the cluster state comes from"),
        (("--state", EXAMPLES, "--demo"), "exactly once"),
        (("--state", EXAMPLES, "--tls-cert-file", "x.crt"), "--tls-cert-file and --tls-key-file go together"),
        (("--state", EXAMPLES, "--deadline", "0"), "--deadline must be more than 0"),
        (("--state", EXAMPLES, "--deadline", "validate/quota=nan"), "--deadline must be more than 0"),
        (("--state", EXAMPLES, "--deadline", "soon"), "--deadline soon: give SECONDS or PATH=SECONDS"),
        (
            ("--state", EXAMPLES, "--deadline", "validate/qouta=8"),
            "no webhook path 'validate/qouta'; the paths are mutate, mutate/prescheduled, validate, ",
        ),
        (("--state", EXAMPLES, "--port", "70000"), "--port must be between 0 and 65535"),
        (("--state", EXAMPLES, "--health-port", "-1"), "--health-port must be between 0 and 65535, got -1"),
        (("--state", EXAMPLES, "--health-port", "8080"), "--health-port 8080: each is its own listener"),
        (("--state", "/nonexistent/dir"), "--state: /nonexistent/dir: no such file or directory"),
        (
            ("--state", EXAMPLES, "--tls-cert-file", "/no/cert", "--tls-key-file", "/no/key"),
            "--tls-cert-file /no/cert: no such file",
        ),
    ],
)
def test_unusable_options_exit_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, err = run(capsys, *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_deadlines_are_given_for_every_path_or_one_path_each() -> None:
    """The chart gives each webhook path 80% of its own timeoutSeconds; the last of each wins."""
    paths = {"validate": (), "validate/quota": (), "validate/sharing": ()}
    given = ["3", "validate/quota=6", "/validate/sharing/=2.5", "validate/quota=8", "4"]
    assert serve._deadlines(given, paths) == (4.0, {"validate/quota": 8.0, "validate/sharing": 2.5})
    assert serve._deadlines(None, paths) == (serve.DEFAULT_DEADLINE, {})


def test_a_pair_named_on_the_command_line_that_can_never_be_served_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    now = dt.datetime.now(dt.UTC)
    ca = generate_ca(now, dt.timedelta(days=1))
    one, other = (issue_serving(ca, ["127.0.0.1"], now, dt.timedelta(days=1)) for _ in range(2))
    (tmp_path / "tls.crt").write_bytes(one.cert_pem)
    (tmp_path / "tls.key").write_bytes(other.key_pem)
    files = ("--tls-cert-file", str(tmp_path / "tls.crt"), "--tls-key-file", str(tmp_path / "tls.key"))
    ports = ("--port", "0", "--metrics-port", "0", "--health-port", "0", "--exit-after", "5")
    code, err = run(capsys, "--state", EXAMPLES, *ports, *files)
    assert code == 2
    assert "--tls-cert-file/--tls-key-file:" in err and "private key does not match the certificate" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules:\n  selectors: {mod: warn}\n", "rules.selectors.mod: unknown field; did you mean mode?"),
        ("certificates: {servce: s}\n", "certificates.servce: unknown field; did you mean service?"),
        ("rules:\n  selectors: {mode: loud}\n", "rules.selectors.mode"),
        ("certificates: {mode: handmade}\n", "certificates.mode: Invalid value: 'handmade'"),
        ("certificates: {mode: secret}\n", "certificates.service: required"),
        ('tls: {minVersion: "1.1"}\n', "tls.minVersion: Invalid value: '1.1': Input should be '1.2' or '1.3"),
        ("tls: {ciphers: all}\n", "tls.ciphers: unknown field"),
        ("logLevel: chatty\n", "logLevel: Invalid value: 'chatty'"),
        ("- a list\n", "must be a mapping of settings"),
        ("rules: [\n", "not valid YAML"),
    ],
)
def test_config_problems_name_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    code, err = run(capsys, "--state", EXAMPLES, "--config", str(config))
    assert code == 2
    assert message in err
    assert str(config) in err


def test_every_section_of_a_config_file_is_checked_in_one_run(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("rules:\n  selectors: {mode: loud}\ntls: {minVersion: '1.1'}\nlogLevel: chatty\n")
    with pytest.raises(UsageError) as err:
        load_config(str(config))
    lines = str(err.value).splitlines()
    assert len(lines) == 3
    fields = {line.split(": ")[1] for line in lines}
    assert fields == {"rules.selectors.mode", "tls.minVersion", "logLevel"}


def test_config_splits_rules_from_server_sections(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "rules:\n  personas: {mode: enforce}\nsnapshot: {maxAgeSeconds: 60}\n"
        "certificates: {mode: selfManaged, service: draguard, namespace: ops}\n"
        'tls: {minVersion: "1.3"}\nlogLevel: debug\n'
    )
    loaded = load_config(str(config))
    assert loaded.policy.rules.personas.mode == "enforce"
    assert loaded.policy.snapshot.max_age_seconds == 60
    assert loaded.certificates is not None and loaded.certificates.mode == "selfManaged"
    assert loaded.certificates.targets.namespace == "ops"
    assert loaded.tls_min_version is ssl.TLSVersion.TLSv1_3
    assert loaded.log_level == "debug"


def test_generated_certificate_covers_local_names_and_the_host(tmp_path: Path) -> None:
    ca_path = generate_pair(str(tmp_path), "webhook.example.com")
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "webhook.example.com"}
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert ca_path == str(tmp_path / "ca.crt")
    assert oct(os.stat(tmp_path / "tls.key").st_mode & 0o777) == "0o600"
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)


def test_unspecified_listen_address_is_not_put_in_the_certificate(tmp_path: Path) -> None:
    generate_pair(str(tmp_path), "0.0.0.0")
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("0.0.0.0") not in names.get_values_for_type(x509.IPAddress)


def options(cert_dir: Path) -> argparse.Namespace:
    return argparse.Namespace(tls_cert_file=None, tls_key_file=None, cert_dir=str(cert_dir), host=None)


def test_an_empty_cert_dir_is_filled_unless_rotation_will_fill_it(tmp_path: Path) -> None:
    config = load_config(None)
    reloader, ca = certificates(options(tmp_path / "local"), config, str(tmp_path / "local"), rotated=False)
    assert ca is not None and reloader.reload() and reloader.served is not None
    waiting, none = certificates(
        options(tmp_path / "rotated"), config, str(tmp_path / "rotated"), rotated=True
    )
    assert none is None
    assert not (tmp_path / "rotated").exists()  # left for the elected replica to write
    assert not waiting.reload() and waiting.served is None  # readiness stays false meanwhile


def test_an_existing_pair_in_the_cert_dir_is_used_as_is(tmp_path: Path) -> None:
    generate_pair(str(tmp_path), None)
    before = (tmp_path / "tls.crt").read_bytes()
    reloader, ca = certificates(options(tmp_path), load_config(None), str(tmp_path), rotated=False)
    assert ca is None and reloader.reload()
    assert (tmp_path / "tls.crt").read_bytes() == before


async def test_the_snapshot_and_what_is_made_later_are_kept_out_of_garbage_collection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve, "REFREEZE_SECONDS", 0.05)
    nodes = [Node.model_validate({"metadata": {"name": f"node-{i}"}}) for i in range(2)]
    state = SimpleNamespace(synced=False, snapshot=Snapshot.build(nodes))
    gc.unfreeze()
    freezing = asyncio.create_task(_keep_frozen(state))  # type: ignore[arg-type]
    try:
        await asyncio.sleep(0.25)
        assert gc.get_freeze_count() == 0
        state.synced = True
        with caplog.at_level(logging.INFO):
            await until(lambda: gc.get_freeze_count() > 0)
        # What is said is the cluster's objects, not the Python objects frozen (tens of thousands).
        assert "cluster state synced: 2 objects" in caplog.messages
        added = ["what an update adds, alive, not frozen yet"]
        assert tracked(added)
        await until(lambda: not tracked(added))
    finally:
        freezing.cancel()
        gc.unfreeze()


async def test_a_cycle_frozen_alive_is_collected_by_the_next_full_pass_once_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cycle alive at a freeze (a request in flight) and let go later is out of every pass of
    the collector: the soak's replica grew 1 MiB a minute so. The periodic full pass frees it."""
    monkeypatch.setattr(serve, "REFREEZE_SECONDS", 0.02)
    monkeypatch.setattr(serve, "FULL_COLLECT_SECONDS", 0.3)

    class InFlight:
        pass

    freed = asyncio.Event()
    alive = InFlight()
    alive.cycle = alive  # type: ignore[attr-defined]
    gone = weakref.ref(alive, lambda _: freed.set())
    state = SimpleNamespace(synced=True, snapshot=Snapshot.build([]))
    gc.unfreeze()
    freezing = asyncio.create_task(_keep_frozen(state))  # type: ignore[arg-type]
    try:
        await until(lambda: not tracked(gone()))  # frozen while in flight
        del alive
        gc.collect()
        assert gone() is not None  # a collection leaves what is frozen alone
        await asyncio.wait_for(freed.wait(), timeout=5)
    finally:
        freezing.cancel()
        gc.unfreeze()


def tracked(obj: object) -> bool:
    """Whether the collector's passes walk ``obj`` (frozen objects are in none of its generations)."""
    return any(o is obj for o in gc.get_objects())


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_the_quota_ledger_is_reconciled_at_the_configured_interval_on_fresh_state_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    judged: list[object] = []

    def reconcile(store: object, snapshot: object, current_as_of: object) -> list[str]:
        judged.append(snapshot)
        if len(judged) == 1:
            raise LedgerUnavailable("the API server did not answer")
        return ["team-a"]

    monkeypatch.setattr(serve, "reconcile_all", reconcile)
    fresh = [False]
    snapshot = object()
    admission = SimpleNamespace(
        config=Config.model_validate({"rules": {"quota": {"reconcileSeconds": 0.05}}}),
        state=SimpleNamespace(synced=True, snapshot=snapshot, age=lambda: 0.0),
        context=lambda: SimpleNamespace(snapshot_fresh=fresh[0]),
        executor=ThreadPoolExecutor(max_workers=1),
    )
    reconciling = asyncio.create_task(serve._reconcile_ledger(admission, object()))  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.INFO, logger="webhook.commands.serve"):
            await asyncio.sleep(0.3)
            assert judged == []  # a stale snapshot would drop charges still in use
            fresh[0] = True
            async with asyncio.timeout(5):
                while len(judged) < 3:
                    await asyncio.sleep(0.01)
    finally:
        reconciling.cancel()
        admission.executor.shutdown()
    assert judged == [snapshot] * len(judged)
    messages = [r.getMessage() for r in caplog.records]
    assert "quota ledger reconcile failed: the API server did not answer" in messages  # and it went on
    assert "quota ledger corrected from the snapshot in: team-a" in messages


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_serve_sets_glibc_malloc_unless_the_environment_does() -> None:
    """Two arenas and a fixed mmap threshold keep RSS flat under issue 16's fuzz (+15% -> +1%)."""
    both = [(parameter, value) for _, parameter, value in MALLOC_SETTINGS]
    assert tune_malloc(environ={}) == both
    assert tune_malloc(environ={"MALLOC_ARENA_MAX": "4"}) == both[:1]


def test_without_mallopt_nothing_is_tuned() -> None:
    assert tune_malloc(libc=object(), environ={}) == []
