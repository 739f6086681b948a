"""``draguard certs generate``: a CA and a serving certificate for people who manage certs by hand.

The chart's default mode generates and rotates certificates in-cluster; this command is for the
"bring your own Secret" mode and for running the webhook locally. It writes ``ca.crt``,
``tls.crt`` and ``tls.key`` (mode 0600) and prints how to hand them to the chart. The CA key is
not written: a hand-managed CA that can sign more certificates is a liability, and running the
command again makes a fresh pair.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from typing import Any

from certs.material import CertificateError, KeyAlgorithm, generate_ca, issue_serving, service_hosts
from webhook.commands import add_command
from webhook.commands.common import add_output
from webhook.output import dump

# RFC 1123 label: what Kubernetes accepts for Service and Namespace names.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
FILES = ("ca.crt", "tls.crt", "tls.key")


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "certs", "Make TLS certificates for the webhook.")
    actions = parser.add_subparsers(
        dest="certs_command", metavar="ACTION", required=True, help="one of these"
    )
    generate = actions.add_parser(
        "generate",
        help="write a CA and a serving certificate (ca.crt, tls.crt, tls.key) to a directory",
        description="Generate a private CA and a serving certificate for <service>.<namespace>.svc "
        "(and .svc.cluster.local), for use with the chart's tls.mode=secret or a local run.",
    )
    generate.add_argument("--service", required=True, help="name of the webhook Service")
    generate.add_argument("--namespace", required=True, help="namespace of the webhook Service")
    generate.add_argument("--out", required=True, metavar="DIR", help="directory to write the files to")
    generate.add_argument(
        "--host", action="append", default=[], metavar="NAME_OR_IP", help="extra DNS name or IP (repeatable)"
    )
    generate.add_argument(
        "--localhost", action="store_true", help="also valid for localhost, 127.0.0.1 and ::1"
    )
    generate.add_argument("--days", type=int, default=365, help="serving certificate validity (default 365)")
    generate.add_argument("--ca-days", type=int, default=3650, help="CA validity (default 3650)")
    generate.add_argument(
        "--key-algorithm",
        choices=[a.value for a in KeyAlgorithm],
        default=KeyAlgorithm.ECDSA_P256.value,
        help="key type (default ecdsa-p256)",
    )
    generate.add_argument("--force", action="store_true", help="overwrite existing files")
    add_output(generate)
    generate.set_defaults(func=generate_command)


def _problems(args: argparse.Namespace) -> list[str]:
    problems = [
        f"--{flag} {value!r} is not a valid Kubernetes name: use lower-case letters, digits and '-', "
        "starting and ending with a letter or digit, at most 63 characters"
        for flag, value in (("service", args.service), ("namespace", args.namespace))
        if not DNS_LABEL.match(value)
    ]
    problems += [
        f"--{flag} must be at least 1, got {value}"
        for flag, value in (("days", args.days), ("ca-days", args.ca_days))
        if value < 1
    ]
    if args.days > args.ca_days:
        problems.append(
            f"--days ({args.days}) must not exceed --ca-days ({args.ca_days}): "
            "a certificate cannot outlive its CA"
        )
    if not args.force:
        existing = [name for name in FILES if os.path.exists(os.path.join(args.out, name))]
        if existing:
            problems.append(f"{args.out} already has {', '.join(existing)}; pass --force to overwrite")
    return problems


def _write(path: str, data: bytes, mode: int) -> None:
    """Write ``data`` so that the file never exists with wider permissions than ``mode``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)  # an existing file (with --force) keeps its old mode through os.open


def generate_command(args: argparse.Namespace) -> int:
    problems = _problems(args)
    if problems:
        for problem in problems:
            print(f"draguard certs generate: {problem}", file=sys.stderr)
        return 2
    now = dt.datetime.now(dt.UTC)
    algorithm = KeyAlgorithm(args.key_algorithm)
    extra = [*(LOCAL_HOSTS if args.localhost else ()), *args.host]
    hosts = service_hosts(args.service, args.namespace, extra)
    try:
        os.makedirs(args.out, exist_ok=True)
        ca = generate_ca(now, dt.timedelta(days=args.ca_days), algorithm)
        serving = issue_serving(ca, hosts, now, dt.timedelta(days=args.days), algorithm)
        _write(os.path.join(args.out, "ca.crt"), ca.cert_pem, 0o644)
        _write(os.path.join(args.out, "tls.crt"), serving.cert_pem, 0o644)
        _write(os.path.join(args.out, "tls.key"), serving.key_pem, 0o600)
    except OSError as err:
        print(f"draguard certs generate: cannot write to {args.out}: {err.strerror}", file=sys.stderr)
        return 2
    except CertificateError as err:
        print(f"draguard certs generate: {err}", file=sys.stderr)
        return 2
    expires = serving.certificate.not_valid_after_utc.date().isoformat()
    if args.output != "table":
        written = {name: os.path.join(args.out, name) for name in FILES}
        dump({"files": written, "hosts": hosts, "expires": expires}, args.output, sys.stdout)
        return 0
    print(f"wrote {', '.join(FILES)} to {args.out} for {', '.join(hosts)} (expires {expires})")
    print("install them with:")
    print(
        f"  kubectl -n {args.namespace} create secret generic {args.service}-tls "
        f"--from-file={args.out}/tls.crt --from-file={args.out}/tls.key --from-file={args.out}/ca.crt"
    )
    print(
        f"  helm install ... --set tls.mode=secret --set tls.secret.name={args.service}-tls "
        f'--set tls.secret.caBundle="$(base64 -w0 {args.out}/ca.crt)"'
    )
    return 0
