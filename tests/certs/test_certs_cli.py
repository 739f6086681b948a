"""``draguard certs generate``: files, permissions, names and refusals."""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509

from certs.material import KeyPair, check_pair
from webhook.cli import main
from webhook.commands import certs as command


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="draguard")
    command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["certs", "generate", *argv])
    code: int = args.func(args)
    return code


def sans(path: Path) -> tuple[list[str], list[str]]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName), [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]


def test_writes_ca_and_serving_pair_with_a_private_key_only_the_owner_reads(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    assert run("--service", "draguard", "--namespace", "gpu-system", "--out", str(out)) == 0
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert stat.S_IMODE((out / "tls.key").stat().st_mode) == 0o600
    pair = KeyPair((out / "tls.crt").read_bytes(), (out / "tls.key").read_bytes())
    cert = check_pair(pair, dt.datetime.now(dt.UTC))
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate((out / "ca.crt").read_bytes()))
    assert sans(out / "tls.crt") == (["draguard.gpu-system.svc", "draguard.gpu-system.svc.cluster.local"], [])


def test_localhost_and_extra_hosts_when_asked(tmp_path: Path) -> None:
    argv = ["--service", "s", "--namespace", "n", "--out", str(tmp_path), "--localhost", "--host", "10.0.0.7"]
    assert run(*argv, "--host", "webhook.example.org") == 0
    dns, ips = sans(tmp_path / "tls.crt")
    assert dns == ["s.n.svc", "s.n.svc.cluster.local", "localhost", "webhook.example.org"]
    assert [ipaddress.ip_address(ip) for ip in ips] == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
        ipaddress.ip_address("10.0.0.7"),
    ]


def test_key_algorithm_and_validity(tmp_path: Path) -> None:
    assert (
        run(
            "--service",
            "s",
            "--namespace",
            "n",
            "--out",
            str(tmp_path),
            "--key-algorithm",
            "rsa-2048",
            "--days",
            "30",
        )
        == 0
    )
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    assert cert.public_key().key_size == 2048  # type: ignore[union-attr]
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=30) <= life <= dt.timedelta(days=30, minutes=10)


def test_refuses_to_overwrite_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--service", "s", "--namespace", "n", "--out", str(tmp_path))
    assert run(*argv) == 0
    before = (tmp_path / "tls.crt").read_bytes()
    assert run(*argv) == 2
    assert "already has ca.crt, tls.crt, tls.key; pass --force" in capsys.readouterr().err
    assert (tmp_path / "tls.crt").read_bytes() == before
    (tmp_path / "tls.key").chmod(0o644)
    assert run(*argv, "--force") == 0
    assert (tmp_path / "tls.crt").read_bytes() != before
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--service", "Draguard", "--namespace", "n"],
            "--service 'Draguard' is not a valid Kubernetes name",
        ),
        (["--service", "s", "--namespace", "n_1"], "--namespace 'n_1' is not a valid Kubernetes name"),
        (["--service", "s", "--namespace", "n", "--days", "0"], "--days must be at least 1"),
        (
            ["--service", "s", "--namespace", "n", "--days", "400", "--ca-days", "300"],
            "must not exceed --ca-days",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert run(*argv, "--out", str(tmp_path / "out")) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unwritable_directory_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert run("--service", "s", "--namespace", "n", "--out", str(blocker / "sub")) == 2
    assert f"cannot write to {blocker / 'sub'}" in capsys.readouterr().err


def test_reachable_through_the_draguard_entry_point(tmp_path: Path) -> None:
    assert main(["certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "tls.key").exists()
