"""``draguard serve``: the admission webhook over HTTPS, on cluster state from the API server or files.

What the command does, for its users, is :data:`DESCRIPTION` (``draguard serve --help``). The config
file is the one the Helm chart renders: the rules' settings (:class:`policies.config.Config`) plus
the three sections read here, because they concern the server and not the decisions:
``certificates`` (:mod:`certs.settings`), ``tls.minVersion`` and ``logLevel``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import datetime as dt
import gc
import ipaddress
import json
import logging
import math
import os
import shlex
import signal
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certs.material import CertificateError, generate_ca, issue_serving
from certs.reloader import CertReloader
from certs.settings import CertSettings, SettingsError, start_rotation
from policies.config import Config
from policies.quota import LedgerUnavailable, MemoryLedgerStore, snapshot_ledger
from policies.rules.registry import RULES
from webhook import demo, logs
from webhook.commands import add_command
from webhook.commands.certs import LOCAL_HOSTS, _write
from webhook.commands.common import UsageError as ReadingUsageError
from webhook.commands.common import add_cluster, add_reading_flags, read_options
from webhook.configfile import ConfigFileError, read_config
from webhook.dryrun_api import DryRunSettings, add_dryrun_routes, add_flags, settings_from_args
from webhook.dryrun_api import SettingsError as DryRunSettingsError
from webhook.kube import ConnectError, KubeError, KubeReader, check_reachable, connect
from webhook.ledger import ApiLedgerStore, ConfigMaps, reconcile_all, with_ledger
from webhook.manifests import ManifestError, decode_documents
from webhook.metrics import Metrics, object_counts
from webhook.output import plural
from webhook.server import DEFAULT_DEADLINE, Admission, Listen, Ports, build_app, readiness, run, split_rules
from webhook.state import ClusterState, FileState, State, relevance

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

log = logging.getLogger(__name__)

TLS_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
LOCAL_VALIDITY = dt.timedelta(days=365)
# How often what was made since is collected and frozen (see _keep_frozen).
REFREEZE_SECONDS = 5.0
# How often everything is unfrozen and collected in one full pass (see _keep_frozen).
FULL_COLLECT_SECONDS = 600.0


DESCRIPTION = """\
Run the admission webhook over HTTPS, with the dry-run endpoint (POST /v1/dryrun) beside it,
metrics and the probes on two plain-HTTP ports.

Where the cluster state comes from (exactly one): --kubeconfig FILE or --context NAME (list and
watch the cluster of a kubeconfig; --context alone uses $KUBECONFIG or ~/.kube/config),
--in-cluster (the pod's service account), --state FILE_OR_DIR (manifests, for offline use and
tests), or --demo (the bundled example GPU cluster on 127.0.0.1, with ready-made curl commands).

TLS is required. --tls-cert-file and --tls-key-file name a pair; --cert-dir holds tls.crt and
tls.key (a kubernetes.io/tls Secret volume). Either way the files are read again when their
content changes, without a restart. With neither, or with an empty --cert-dir outside the chart's
selfManaged mode, a private CA and a serving certificate for localhost, 127.0.0.1, ::1 and --host
are generated into the directory (a temporary one by default), and the CA's path is printed for
clients' --cacert.

--config FILE is the file the Helm chart renders: the rules' settings plus 'certificates',
'tls.minVersion' ("1.2" or "1.3") and 'logLevel'.

Exit codes: 0 after Ctrl-C, SIGTERM or --exit-after; 2 when the options, the config, the
manifests, the kubeconfig, the cluster or the certificates cannot be used, or the ports cannot
be bound."""


class UsageError(Exception):
    """Options, config, manifests or certificates that cannot be used (exit code 2)."""


@dataclass(frozen=True)
class ServeConfig:
    """The config file split in two: the rules' :class:`Config` and the server's own sections."""

    policy: Config
    certificates: CertSettings | None = None
    tls_min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    log_level: str = "info"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "serve", DESCRIPTION)
    source = p.add_argument_group("cluster state (choose one)")
    source.add_argument(
        "--state",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE_OR_DIR",
        help="manifests: files, directories (read recursively) or - for stdin (repeatable)",
    )
    add_cluster(source, "list and watch")
    source.add_argument(
        "--in-cluster", action="store_true", help="list and watch with the pod's service account"
    )
    source.add_argument("--demo", action="store_true", help="the bundled example cluster on 127.0.0.1")
    add_reading_flags(p.add_argument_group("how --state manifests are read"))
    p.add_argument("--config", metavar="FILE", help="draguard config (YAML), as the Helm chart renders it")
    p.add_argument("--host", default=None, help="address to listen on (default: every interface)")
    p.add_argument("--port", type=int, default=8443, help="HTTPS port (default 8443; 0: any free port)")
    p.add_argument("--metrics-port", type=int, default=8080, help="metrics port, plain HTTP (default 8080)")
    p.add_argument(
        "--health-port", type=int, default=8081, help="/healthz and /readyz, plain HTTP (default 8081)"
    )
    p.add_argument("--tls-cert-file", metavar="FILE", help="serving certificate (PEM, with its chain)")
    p.add_argument("--tls-key-file", metavar="FILE", help="private key of --tls-cert-file (PEM)")
    p.add_argument(
        "--cert-dir", metavar="DIR", help="directory with tls.crt and tls.key (generated if absent)"
    )
    p.add_argument(
        "--deadline",
        action="append",
        metavar="[PATH=]SECONDS",
        help=f"answer per the rules' failure policy after this long (default {DEFAULT_DEADLINE:g}; keep it "
        "below the webhook configuration's timeoutSeconds); PATH=SECONDS for one webhook path only, "
        "e.g. validate/quota=8 (repeatable)",
    )
    p.add_argument(
        "--exit-after", type=float, metavar="SECONDS", help="stop after this long (scripts, tests)"
    )
    p.add_argument("--log-level", choices=logs.LEVELS, help="default: the config's logLevel, else info")
    add_flags(p)
    p.set_defaults(func=serve_command)


def _check_options(args: argparse.Namespace) -> None:
    sources = [bool(args.state), bool(args.kubeconfig or args.context), args.in_cluster, args.demo]
    if sum(sources) != 1:
        raise UsageError(
            "say where the cluster state comes from, exactly once: --state FILE_OR_DIR, --kubeconfig FILE "
            "(or --context NAME), --in-cluster or --demo"
        )
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise UsageError("--tls-cert-file and --tls-key-file go together: give both or neither")
    if args.tls_cert_file and args.cert_dir:
        raise UsageError("give either --tls-cert-file/--tls-key-file or --cert-dir, not both")
    if args.demo and args.tls_cert_file:
        raise UsageError("--demo generates its own certificate: leave out --tls-cert-file/--tls-key-file")
    ports = {"port": args.port, "metrics-port": args.metrics_port, "health-port": args.health_port}
    for flag, value in ports.items():
        if not 0 <= value <= 65535:
            raise UsageError(f"--{flag} must be between 0 and 65535, got {value}")
    fixed = [value for value in ports.values() if value != 0]
    if len(set(fixed)) < len(fixed):
        shown = ", ".join(f"--{flag} {value}" for flag, value in ports.items())
        raise UsageError(f"{shown}: each is its own listener, so they must differ (0: any free port)")
    if args.exit_after is not None and args.exit_after <= 0:
        raise UsageError(f"--exit-after must be more than 0 seconds, got {args.exit_after:g}")


def _deadlines(given: list[str] | None, paths: Mapping[str, object]) -> tuple[float, dict[str, float]]:
    """``--deadline SECONDS`` (every webhook path) and ``--deadline PATH=SECONDS`` (one path: the
    chart gives each its own, below its webhook's timeoutSeconds), the last of each winning."""
    default, deadlines = DEFAULT_DEADLINE, {}
    for text in given or ():
        path, _, seconds = text.rpartition("=")
        try:
            value = float(seconds)
        except ValueError:
            shape = "give SECONDS or PATH=SECONDS, e.g. validate/quota=8"
            raise UsageError(f"--deadline {text}: {shape}") from None
        if not 0 < value < math.inf:
            raise UsageError(f"--deadline must be more than 0 seconds, got {seconds}")
        path = path.strip("/")
        if not path:
            default = value
        elif path in paths:
            deadlines[path] = value
        else:
            known = ", ".join(sorted(paths))
            raise UsageError(f"--deadline {text}: no webhook path {path!r}; the paths are {known}")
    return default, deadlines


def load_config(path: str | None) -> ServeConfig:
    """Read and check the config file (the same check as every command's,
    :func:`webhook.configfile.read_config`), then what only serve uses: the certificates' values."""
    try:
        config = read_config(path)
    except ConfigFileError as err:
        raise UsageError(str(err)) from None
    certificates = None
    if config.certificates is not None:
        try:
            section = config.certificates.model_dump(by_alias=True, exclude_none=True)
            certificates = CertSettings.from_mapping(section)
        except SettingsError as err:
            raise UsageError(f"--config {path}: {err}") from None
    return ServeConfig(config, certificates, TLS_VERSIONS[config.tls.min_version], config.log_level)


def _is_unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def generate_pair(directory: str, host: str | None) -> str:
    """A private CA and a serving certificate in ``directory``; returns the CA's path."""
    hosts = list(dict.fromkeys([*LOCAL_HOSTS, *([host] if host and not _is_unspecified(host) else [])]))
    now = dt.datetime.now(dt.UTC)
    try:
        os.makedirs(directory, exist_ok=True)
        ca = generate_ca(now, LOCAL_VALIDITY)
        serving = issue_serving(ca, hosts, now, LOCAL_VALIDITY)
        _write(os.path.join(directory, "ca.crt"), ca.cert_pem, 0o644)
        _write(os.path.join(directory, "tls.key"), serving.key_pem, 0o600)
        _write(os.path.join(directory, "tls.crt"), serving.cert_pem, 0o644)
    except OSError as err:
        raise UsageError(f"cannot write a certificate to {directory}: {err.strerror}") from None
    except CertificateError as err:
        raise UsageError(str(err)) from None
    return os.path.join(directory, "ca.crt")


def certificates(
    args: argparse.Namespace, config: ServeConfig, cert_dir: str, rotated: bool, client_ca: str | None = None
) -> tuple[CertReloader, str | None]:
    """The reloader of the serving pair, and the CA path when the pair was generated here.

    ``rotated``: the elected replica writes the pair into ``cert_dir`` (selfManaged in a cluster), so
    an empty directory is waited for rather than filled. ``client_ca``: the bundle that the dry-run
    endpoint's client certificates are checked against.
    """
    if args.tls_cert_file:
        for flag, path in (("--tls-cert-file", args.tls_cert_file), ("--tls-key-file", args.tls_key_file)):
            if not os.path.isfile(path):
                raise UsageError(f"{flag} {path}: no such file")
        reloader = CertReloader(
            args.tls_cert_file, args.tls_key_file, config.tls_min_version, client_ca_file=client_ca
        )
        return reloader, None
    reloader = CertReloader.from_dir(cert_dir, config.tls_min_version, client_ca)
    present = os.path.isfile(reloader.cert_file) and os.path.isfile(reloader.key_file)
    if present or rotated:
        return reloader, None
    return reloader, generate_pair(cert_dir, args.host)


def _load_state(
    args: argparse.Namespace, api: ApiClient | None, example_dir: str, policy: Config
) -> tuple[State, list[Written]]:
    """The state source (holding what ``policy``'s rules read), and for ``--demo`` the example
    requests written to ``example_dir``."""
    now = dt.datetime.now(dt.UTC)
    keep = relevance(policy)
    if api is not None:
        return ClusterState(KubeReader(api), keep=keep), []
    if not args.demo:
        try:
            return FileState.load(args.state, now, keep, read_options(args), say=log.warning), []
        except (ManifestError, ReadingUsageError) as err:
            raise UsageError(f"--state: {err}") from None
    docs, pod = demo.split(demo.documents())
    loaded, problems = decode_documents(docs)
    assert not problems, problems  # the bundled files are tested
    written = []
    for example in demo.examples(pod):
        path = os.path.join(example_dir, f"{example.name}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(example.body, fh, indent=2)
        written.append(Written(example, path))
    return FileState.from_objects((d.obj for d in loaded), now, keep), written


@dataclass(frozen=True)
class Written:
    """A demo example and the file its body was written to."""

    example: demo.Example
    path: str


def _url(scheme: str, host: str | None, port: int) -> str:
    shown = "127.0.0.1" if not host or _is_unspecified(host) else host
    return f"{scheme}://{'[' + shown + ']' if ':' in shown else shown}:{port}"


def _banner(args: argparse.Namespace, ca: str | None, examples: list[Written]) -> Callable[[Ports], None]:
    def started(ports: Ports) -> None:
        url = _url("https", args.host, ports.https)
        print(f"draguard serving {url} (/validate[/<rule>], /mutate[/<rule>], /v1/dryrun, /healthz, /readyz)")
        print(f"metrics at {_url('http', args.host, ports.metrics)}/metrics")
        print(f"probes at {_url('http', args.host, ports.health)} (/healthz, /readyz)")
        if ca is not None:
            print(f"generated a private CA: clients verify the server with {ca}")
        if examples and ca is not None:
            print("try it (each curl prints draguard's answer):")
            for written in examples:
                print(f"  # {written.example.answer}")
                print(
                    f"  curl -sS --cacert {shlex.quote(ca)} -H 'Content-Type: application/json' "
                    f"--data @{shlex.quote(written.path)} {url}{written.example.path}"
                )
        print("press Ctrl-C to stop")
        sys.stdout.flush()

    return started


@contextmanager
def _rotation(config: ServeConfig, api: ApiClient | None) -> Iterator[bool]:
    """Run selfManaged certificate rotation for the lifetime of the server; yields whether it runs."""
    settings = config.certificates
    if settings is None or settings.mode != "selfManaged" or api is None:
        yield False
        return
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    thread, stop = start_rotation(settings, api, identity)
    try:
        yield True
    finally:
        stop.set()
        thread.join(timeout=5)


async def _reconcile_ledger(admission: Admission, store: ApiLedgerStore) -> None:
    """Heal the quota ledger from the snapshot now and then (charges whose release was never seen).

    Only on a synced, fresh snapshot: a stale one would remove charges that are still in use.
    """
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(admission.config.rules.quota.reconcile_seconds)
        if not admission.state.synced or not admission.context().snapshot_fresh:
            continue
        # When the snapshot was last known current: measured before it is taken, so never later.
        current_as_of = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=admission.state.age())
        try:
            fixed = await loop.run_in_executor(
                admission.executor, reconcile_all, store, admission.state.snapshot, current_as_of
            )
        except LedgerUnavailable as err:
            log.warning("quota ledger reconcile failed: %s", err)
            continue
        if fixed:
            log.info("quota ledger corrected from the snapshot in: %s", ", ".join(fixed))


async def _keep_frozen(state: State) -> None:
    """Keep the snapshot's objects out of the garbage collector's passes: frozen once the first
    snapshot is in, then, every :data:`REFREEZE_SECONDS`, what was made since collected and frozen.

    A snapshot is hundreds of thousands of objects, and a full collection walks every object not
    frozen, stalling the event loop for up to a second (a dry run listing 5,000 nodes set one off
    every other request). Updates replace objects one by one (the store keeps the rest), so the
    first freeze covers the bulk; what updates and caches add (100 pod events a second, the
    selector rule's device bindings) is collected and frozen in turn, a few milliseconds a time,
    before the collector's own full passes walk it again and again (half a second each within
    minutes of such churn). Objects frozen and later let go are still freed by reference counting,
    and garbage cycles are collected before each freeze, so none is frozen. But a cycle alive when
    frozen (a request in flight, a watch's connection) is never collected once let go: the soak
    grew a replica by 1 MiB a minute so. Every :data:`FULL_COLLECT_SECONDS` all is unfrozen and
    collected in one full pass (up to a second at 5,000 nodes and 100,000 pods), which bounds that.
    """
    while not state.synced:
        await asyncio.sleep(0.1)
    gc.collect()
    gc.freeze()
    # The snapshot's objects, by kind, are what a person can check against the cluster; the count
    # of Python objects frozen (every string and dict of every model) would say nothing to them.
    counts = object_counts(state.snapshot)
    total = plural(sum(counts.values()), "object")
    log.info("cluster state synced: %s", total, extra={"fields": {"objects": counts}})
    unfrozen = time.monotonic()
    while True:
        await asyncio.sleep(REFREEZE_SECONDS)
        if time.monotonic() - unfrozen >= FULL_COLLECT_SECONDS:
            gc.unfreeze()
            unfrozen = time.monotonic()
        gc.collect()
        gc.freeze()


async def _serve(
    admission: Admission,
    tls: CertReloader,
    args: argparse.Namespace,
    started: Callable[[Ports], None],
    ledger: ApiLedgerStore | None,
    dryrun: DryRunSettings,
    api: ApiClient | None,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if args.exit_after is not None:
        loop.call_later(args.exit_after, stop.set)
    reconcile = asyncio.create_task(_reconcile_ledger(admission, ledger)) if ledger is not None else None
    freeze = asyncio.create_task(_keep_frozen(admission.state))
    listen = Listen(args.host, args.port, args.metrics_port, args.health_port)
    # The dry-run endpoint shares the port: same certificate, same snapshot, its own authentication.
    ready = readiness(admission.state, tls, admission.config.snapshot.max_age_seconds)
    app = build_app(admission, ready)
    add_dryrun_routes(app, lambda: admission.state.snapshot, dryrun, api_client=api)
    try:
        await run(app, ready, admission, tls, listen, stop, started)
    finally:
        freeze.cancel()
        if reconcile is not None:
            reconcile.cancel()


def _api_client(args: argparse.Namespace) -> ApiClient | None:
    """The client of the cluster the state is watched from, None when it comes from files.

    A kubeconfig's cluster must answer now: a wrong address or CA is one line and exit 2 rather
    than a server that retries forever and never gets ready. In a pod (--in-cluster) the API
    server may still be coming up, and the watch's retries are the right answer.
    """
    if not (args.kubeconfig or args.context or args.in_cluster):
        return None
    try:
        api = connect(args.kubeconfig, args.in_cluster, args.context)
        if not args.in_cluster:
            check_reachable(api)
    except (ConnectError, KubeError) as err:
        raise UsageError(str(err)) from None
    return api


# glibc's malloc.h: mallopt's parameters, and the environment variables that set them at start.
MALLOC_SETTINGS = (
    ("MALLOC_MMAP_THRESHOLD_", -3, 128 * 1024),  # M_MMAP_THRESHOLD, in bytes
    ("MALLOC_ARENA_MAX", -8, 2),  # M_ARENA_MAX
)


def tune_malloc(libc: Any = None, environ: Mapping[str, str] = os.environ) -> list[tuple[int, int]]:
    """Keep the server's memory flat under load: at most two malloc arenas, and buffers of 128 KiB
    or more always in mappings of their own, returned to the system when freed.

    glibc gives threads that allocate at the same time arenas of their own (up to eight per core),
    and raises its threshold for mapping a large buffer on its own each time one is freed, after
    which 3 MiB bodies come out of the arenas and their memory stays with the process. In issue 16's
    100,000-request fuzz RSS grew 15% over the second half; with these settings (as the environment
    variables would set them) 1%. A variable the user set is left to glibc; elsewhere than glibc
    (musl, macOS) nothing happens. Returns the (parameter, value) pairs set.
    """
    mallopt = getattr(libc if libc is not None else ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return []
    done = []
    for variable, parameter, value in MALLOC_SETTINGS:
        if variable not in environ and mallopt(parameter, value) == 1:
            done.append((parameter, value))
    return done


def serve_command(args: argparse.Namespace) -> int:
    try:
        return _serve_checked(args)
    except UsageError as err:
        for line in str(err).splitlines():
            print(f"draguard serve: {line}", file=sys.stderr)
        return 2


def _serve_checked(args: argparse.Namespace) -> int:
    _check_options(args)
    default, deadlines = _deadlines(args.deadline, split_rules(RULES))
    if args.demo:
        args.host = args.host or "127.0.0.1"
    config = load_config(args.config)
    try:
        dryrun = settings_from_args(args, args.demo)
    except DryRunSettingsError as err:
        raise UsageError(str(err)) from None
    # Before the logs are configured: the client's retries of an unreachable server would each be a
    # log line before the one line that says what is wrong.
    api = _api_client(args)
    logs.configure(args.log_level or config.log_level)
    tune_malloc()  # before the server's threads start
    with ExitStack() as stack:
        cert_dir = args.cert_dir or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="draguard-demo-" if args.demo else "draguard-certs-")
        )
        rotated = stack.enter_context(_rotation(config, api))
        tls, ca = certificates(args, config, cert_dir, rotated, dryrun.client_ca_file)
        if ca is not None:
            log.info("generated a private CA and serving certificate; clients verify the server with %s", ca)
        if not tls.reload() and args.tls_cert_file and tls.refusal is not None:
            # Files named on the command line are meant to be served now; a mounted directory
            # may still be being written (or, with selfManaged, not yet), and is waited for.
            raise UsageError(f"--tls-cert-file/--tls-key-file: {tls.refusal}")
        state, examples = _load_state(args, api, cert_dir, config.policy)
        if isinstance(state, ClusterState):
            state.start()
            stack.callback(state.stop)
        # Behind the webhook the quota rule charges a ledger: in a cluster the one all replicas share
        # through the API server; on files one in this process, seeded from the allocated claims.
        ledger = ApiLedgerStore(ConfigMaps(api)) if api is not None else None
        store = ledger or MemoryLedgerStore(snapshot_ledger(state.snapshot))
        rules = with_ledger(RULES, store)
        metrics = Metrics(state, tls)
        admission = Admission(split_rules(rules), config.policy, state, metrics, default, deadlines)
        try:
            asyncio.run(_serve(admission, tls, args, _banner(args, ca, examples), ledger, dryrun, api))
        except OSError as err:
            ports = f"{args.port}, {args.metrics_port} or {args.health_port}"
            raise UsageError(f"cannot listen on port {ports}: {err.strerror}") from None
    return 0
