"""The reloader against a real TLS server on 127.0.0.1: what the next handshake presents."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from cryptography import x509

from certs.material import KeyPair, generate_ca, issue_serving
from certs.reloader import CertReloader

NOW = dt.datetime.now(dt.UTC)
HOSTS = ["localhost", "127.0.0.1"]


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return generate_ca(NOW, dt.timedelta(days=30))


def leaf(ca: KeyPair, *, issued: dt.datetime = NOW, days: float = 10) -> KeyPair:
    return issue_serving(ca, HOSTS, issued, dt.timedelta(days=days))


def write(directory: Path, pair: KeyPair) -> None:
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)


def client_context(ca: KeyPair, maximum: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    context.maximum_version = maximum
    return context


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()
    writer.close()


@pytest.fixture
async def server(tmp_path: Path, ca: KeyPair) -> AsyncIterator[tuple[CertReloader, int]]:
    write(tmp_path, leaf(ca))
    reloader = CertReloader.from_dir(str(tmp_path))
    assert reloader.reload()
    srv = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=reloader.server_context)
    port = srv.sockets[0].getsockname()[1]
    yield reloader, port
    srv.close()
    await srv.wait_closed()


async def presented(
    port: int, context: ssl.SSLContext, server_hostname: str | None = "localhost"
) -> x509.Certificate:
    """Do one real handshake and return the certificate the server presented."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=server_hostname
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.write(b"ping\n")
        assert await reader.readline() == b"ping\n"
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()


def serial(pair: KeyPair) -> int:
    return pair.certificate.serial_number


@pytest.mark.parametrize("maximum", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
async def test_next_handshake_presents_the_new_certificate_without_restart(
    server: tuple[CertReloader, int], ca: KeyPair, tmp_path: Path, maximum: ssl.TLSVersion
) -> None:
    reloader, port = server
    context = client_context(ca, maximum)
    first = await presented(port, context)
    # A connection made before the swap must keep working after it: no request is dropped.
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost"
    )

    fresh = leaf(ca)
    write(tmp_path, fresh)
    assert reloader.reload()

    assert (await presented(port, context)).serial_number == serial(fresh) != first.serial_number
    writer.write(b"still here\n")
    assert await reader.readline() == b"still here\n"
    writer.close()


async def test_swap_also_applies_to_clients_that_send_no_server_name(
    server: tuple[CertReloader, int], ca: KeyPair, tmp_path: Path
) -> None:
    """Clients dialling an IP address send no SNI; the callback must still pick the new pair."""
    reloader, port = server
    context = client_context(ca)
    fresh = leaf(ca)
    write(tmp_path, fresh)
    assert reloader.reload()
    assert (await presented(port, context, server_hostname="127.0.0.1")).serial_number == serial(fresh)


async def test_watch_picks_up_a_change_on_its_own(
    server: tuple[CertReloader, int], ca: KeyPair, tmp_path: Path
) -> None:
    reloader, port = server
    fresh = leaf(ca)
    watcher = asyncio.create_task(reloader.watch(interval=0.01))
    try:
        write(tmp_path, fresh)
        async with asyncio.timeout(5):
            while reloader.served is None or reloader.served.certificate.serial_number != serial(fresh):
                await asyncio.sleep(0.01)
    finally:
        watcher.cancel()
    assert (await presented(port, client_context(ca))).serial_number == serial(fresh)


def expired(ca: KeyPair) -> KeyPair:
    return leaf(ca, issued=NOW - dt.timedelta(days=3), days=1)


def mismatched(ca: KeyPair) -> KeyPair:
    return KeyPair(leaf(ca).cert_pem, leaf(ca).key_pem)


def not_pem(ca: KeyPair) -> KeyPair:
    return KeyPair(b"-----BEGIN CERTIFICATE-----\nnot base64\n", leaf(ca).key_pem)


@pytest.mark.parametrize(
    ("make_bad", "why"),
    [
        (expired, "expired at"),
        (mismatched, "private key does not match the certificate"),
        (not_pem, "not a PEM certificate"),
    ],
)
async def test_a_bad_pair_is_refused_with_a_clear_log_line_and_the_old_one_keeps_serving(
    server: tuple[CertReloader, int],
    ca: KeyPair,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    make_bad: Callable[[KeyPair], KeyPair],
    why: str,
) -> None:
    reloader, port = server
    before = await presented(port, client_context(ca))
    write(tmp_path, make_bad(ca))
    with caplog.at_level(logging.ERROR, logger="certs.reloader"):
        assert not reloader.reload()
        assert not reloader.reload()  # polled again: still refused, but not logged twice
    refusals = [r.getMessage() for r in caplog.records if "refusing new TLS certificate" in r.getMessage()]
    assert len(refusals) == 1
    assert why in refusals[0]
    assert "still serving the previous certificate" in refusals[0]
    assert reloader.refusal is not None and why in reloader.refusal  # never servable as they are
    assert (await presented(port, client_context(ca))).serial_number == before.serial_number


async def test_a_pair_not_valid_yet_is_retried_and_served_once_valid(
    tmp_path: Path, ca: KeyPair, caplog: pytest.LogCaptureFixture
) -> None:
    """Clock skew: the leader's clock runs ahead and this replica sees a notBefore a little in the
    future. The same files must be looked at again later, not remembered as refused until they
    change (which, for a fresh certificate, is months away)."""
    current = leaf(ca)
    write(tmp_path, current)
    clock = [NOW]
    reloader = CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), clock=lambda: clock[0])
    assert reloader.reload()
    srv = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=reloader.server_context)
    port = srv.sockets[0].getsockname()[1]
    try:
        # Issued by a leader 8 minutes ahead: notBefore is 3 minutes from this replica's now.
        skewed = leaf(ca, issued=NOW + dt.timedelta(minutes=8))
        assert skewed.certificate.not_valid_before_utc > NOW
        write(tmp_path, skewed)
        with caplog.at_level(logging.ERROR, logger="certs.reloader"):
            assert not reloader.reload()
            clock[0] = NOW + dt.timedelta(minutes=1)
            assert not reloader.reload()  # still early: refused again, but said only once
        (refusal,) = [r.getMessage() for r in caplog.records if "refusing new TLS" in r.getMessage()]
        assert "not valid before" in refusal and "retry" in refusal
        assert reloader.refusal is None  # servable later: not a refusal for good
        assert (await presented(port, client_context(ca))).serial_number == serial(current)

        clock[0] = skewed.certificate.not_valid_before_utc
        assert reloader.reload()
        assert reloader.served is not None and reloader.served.certificate.serial_number == serial(skewed)
    finally:
        srv.close()
        await srv.wait_closed()


async def test_a_mismatched_pair_from_the_future_is_not_retried(
    tmp_path: Path, ca: KeyPair, caplog: pytest.LogCaptureFixture
) -> None:
    """Only "not yet valid" is worth waiting for; a key that does not match never will."""
    write(tmp_path, leaf(ca))
    clock = [NOW]
    reloader = CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), clock=lambda: clock[0])
    assert reloader.reload()
    later = NOW + dt.timedelta(minutes=8)
    write(tmp_path, KeyPair(leaf(ca, issued=later).cert_pem, leaf(ca, issued=later).key_pem))
    with caplog.at_level(logging.ERROR, logger="certs.reloader"):
        assert not reloader.reload()
        clock[0] = later
        assert not reloader.reload()
    (refusal,) = [r.getMessage() for r in caplog.records if "refusing new TLS" in r.getMessage()]
    assert "does not match" in refusal


async def test_a_good_pair_after_a_bad_one_is_served(
    server: tuple[CertReloader, int], ca: KeyPair, tmp_path: Path
) -> None:
    reloader, port = server
    write(tmp_path, mismatched(ca))
    assert not reloader.reload()
    fresh = leaf(ca)
    write(tmp_path, fresh)
    assert reloader.reload()
    assert (await presented(port, client_context(ca))).serial_number == serial(fresh)


def test_nothing_is_served_until_files_exist(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The Secret volume is optional in self-managed mode: the pod starts before the leader wrote it."""
    reloader = CertReloader.from_dir(str(tmp_path))
    with caplog.at_level(logging.ERROR, logger="certs.reloader"):
        assert not reloader.reload()
    assert reloader.served is None
    assert "no certificate is served yet" in caplog.text
    assert "tls.crt" in caplog.text


async def test_handshake_fails_while_nothing_is_loaded(tmp_path: Path, ca: KeyPair) -> None:
    reloader = CertReloader.from_dir(str(tmp_path))
    srv = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=reloader.server_context)
    port = srv.sockets[0].getsockname()[1]
    try:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            await presented(port, client_context(ca))
    finally:
        srv.close()
        await srv.wait_closed()
