"""Reading the cluster: paginated lists and watch streams, as plain JSON, through the ``kubernetes`` client.

The client's typed list/watch methods turn every object into a generated model, which drops the
fields the model does not know and rewrites timestamps; draguard decodes the API server's JSON
itself (:func:`policies.api.kinds.decode`), so here the client only provides configuration,
authentication, TLS and the connection pool (the approach of :mod:`certs.kube`). A watch is read
line by line from the chunked response, one event per line, as the API server writes it.

Errors come back as :class:`KubeError` with the HTTP status; 410 Gone and 404 Not Found have their
own classes because the caller acts on them (re-list; skip a resource the cluster does not serve).

The client is imported where a connection is made: its generated models are 35 MiB, which
``serve --state`` and the offline commands, never talking to a cluster, do not load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import urllib3
import yaml

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, Configuration

# Enough pooled connections for one long-lived watch per resource plus the lists running beside them:
# a smaller pool makes urllib3 open and drop extra connections on every reconnect.
POOL_SIZE = 24
CONNECT_TIMEOUT = 10.0
LIST_READ_TIMEOUT = 60.0
# How long a watch's response headers may take: the API server starts a watch at once (or within
# the few seconds it may wait for its cache to catch up). A request left hanging (a connection cut
# half-way through a load balancer) would otherwise wait the stream's read timeout, minutes, with
# the state going stale; the issue 25 soak saw a replica's snapshot 120 s old after watches were cut.
WATCH_START_TIMEOUT = 15.0


class KubeError(Exception):
    """A request the API server answered with an error (``status`` 0: no answer at all)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message


class Gone(KubeError):
    """410: the resourceVersion (or continue token) is older than the server's history: re-list."""


class NotServed(KubeError):
    """404 on a collection: this cluster does not serve the resource (e.g. an API version it lacks)."""


@dataclass(frozen=True)
class ApiResource:
    """A cluster-wide collection: ``/api/v1/pods`` or ``/apis/resource.k8s.io/v1/resourceslices``."""

    api_version: str
    plural: str
    kind: str
    # Optional resources may be missing from the cluster; a 404 then means "nothing to watch".
    optional: bool = False

    @property
    def path(self) -> str:
        return self.object_path("", "").removesuffix("/")

    def object_path(self, namespace: str, name: str) -> str:
        """The path of one object: ``/api/v1/namespaces/team-a/pods/train``, ``/api/v1/nodes/n1``."""
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        scope = f"/namespaces/{namespace}" if namespace else ""
        return f"{root}{scope}/{self.plural}/{name}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.api_version}"


class ConnectError(Exception):
    """No usable kubeconfig, context or in-cluster service account; the message (one line) says
    which and why."""


def kubeconfig_paths(kubeconfig: str | None) -> list[str]:
    """The kubeconfig files to read, as kubectl finds them: ``--kubeconfig``, else ``$KUBECONFIG``
    (several files separated by ``:``, read in order), else ``~/.kube/config``."""
    listed = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    paths = listed.split(":") if not kubeconfig else [kubeconfig]
    return [os.path.expanduser(p) for p in paths if p]


def _read_kubeconfig(path: str) -> dict[str, Any]:
    """One kubeconfig file: one YAML document holding a mapping (the client's own loader ends in a
    Python traceback on anything else)."""
    try:
        with open(path, encoding="utf-8") as fh:
            docs = list(yaml.safe_load_all(fh))
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or err
        raise ConnectError(f"kubeconfig {path}: cannot read: {reason}") from None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConnectError(f"kubeconfig {path}: not valid YAML: {problem}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        found = f"{len(docs)} YAML documents" if len(docs) != 1 else f"a {type(docs[0]).__name__}"
        raise ConnectError(f"kubeconfig {path}: must be one YAML document holding a Config, found {found}")
    return docs[0]


@dataclass(frozen=True)
class KubeContext:
    """The kubeconfig context in use: its name, and the namespace it names ("" for none)."""

    name: str
    namespace: str = ""


def _context(paths: list[str], wanted: str | None) -> KubeContext:
    """The context to use: ``wanted``, else the first current-context set (kubectl's merge rule);
    either must name a context of the files. The first file that defines a context wins, as in
    kubectl's merge."""
    configs = [_read_kubeconfig(p) for p in paths]
    contexts: dict[str, Any] = {}
    for found in configs:
        for c in found.get("contexts") or []:
            if isinstance(c, dict) and c.get("name"):
                contexts.setdefault(str(c["name"]), c.get("context"))
    shown = f"(contexts: {', '.join(contexts)})" if contexts else "(it defines no contexts)"
    where = f"kubeconfig {':'.join(paths)}"
    context = wanted or next((str(c["current-context"]) for c in configs if c.get("current-context")), None)
    if context is None:
        raise ConnectError(f"{where}: no current-context is set: choose one with --context {shown}")
    if context not in contexts:
        raise ConnectError(f"{where}: no context named {context!r} {shown}")
    body = contexts[context]
    namespace = body.get("namespace") if isinstance(body, dict) else None
    return KubeContext(context, namespace if isinstance(namespace, str) else "")


def connect(kubeconfig: str | None, in_cluster: bool, context: str | None = None) -> ApiClient:
    """An API client from the kubeconfig (``None``: ``$KUBECONFIG`` or ``~/.kube/config``) and its
    ``context`` (``None``: its current-context), or from the pod's service account.

    Every problem is a :class:`ConnectError` of one line: no file, a file that is not one YAML
    mapping, a missing context, credentials the client cannot use.
    """
    if not in_cluster:
        return connect_kubeconfig(kubeconfig, context)[0]
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError) as err:
        raise ConnectError(f"cannot use the in-cluster service account: {_one_line(err)}") from None
    configuration.connection_pool_maxsize = POOL_SIZE
    return client.ApiClient(configuration)


def connect_kubeconfig(kubeconfig: str | None, context: str | None) -> tuple[ApiClient, KubeContext]:
    """:func:`connect` through a kubeconfig, and the context it uses (its namespace is where
    kubectl puts objects that name none)."""
    from kubernetes import client

    configuration = client.Configuration()
    chosen = _load_kubeconfig(kubeconfig, context, configuration)
    configuration.connection_pool_maxsize = POOL_SIZE
    return client.ApiClient(configuration), chosen


def _load_kubeconfig(
    kubeconfig: str | None, context: str | None, configuration: Configuration
) -> KubeContext:
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    # Files $KUBECONFIG lists that do not exist are passed over, as kubectl does; a file named
    # with --kubeconfig must be there.
    paths = [p for p in kubeconfig_paths(kubeconfig) if kubeconfig or os.path.exists(p)]
    if not paths:
        searched = ":".join(kubeconfig_paths(None))
        if os.environ.get("KUBECONFIG"):
            raise ConnectError(f"no kubeconfig found: $KUBECONFIG names {searched}, which does not exist")
        raise ConnectError(f"no kubeconfig found at {searched}: give --kubeconfig FILE or set $KUBECONFIG")
    chosen = _context(paths, context)
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=":".join(paths), context=chosen.name, client_configuration=configuration
        )
    except (ConfigException, OSError, TypeError, ValueError, KeyError, AttributeError) as err:
        raise ConnectError(f"kubeconfig {':'.join(paths)}: {_one_line(err)}") from None
    return chosen


def _one_line(err: object) -> str:
    """An error's text on one line (the client's messages may span several)."""
    return " ".join(str(err).split()) or type(err).__name__


def _root_cause(err: object) -> str:
    """The innermost reason of a connection failure, ``Connection refused`` rather than urllib3's
    three nested wrappers around it."""
    while True:
        inner = getattr(err, "reason", None) or getattr(err, "__cause__", None)
        if not isinstance(inner, BaseException) or inner is err:
            break
        err = inner
    text = _one_line(err)
    return text.split("] ", 1)[1] if text.startswith("[Errno") else text


def check_reachable(api: ApiClient) -> None:
    """Ask the API server its version, so that an unreachable or untrusted server, or credentials it
    refuses, are one clear :class:`KubeError` at start rather than a stream of retries later.

    Any other answer means the server is there (some servers, stand-ins among them, do not serve
    ``/version``); what it lets the credentials list is for the lists to find out.
    """
    try:
        KubeReader(api).version()
    except KubeError as err:
        if err.status in (0, 401):
            raise


def _error(status: int, body: bytes, reason: str) -> KubeError:
    """The API server's ``metav1.Status`` message when there is one, else the HTTP reason."""
    message = reason
    try:
        found = json.loads(body)
        if isinstance(found, dict) and found.get("message"):
            message = str(found["message"])
    except ValueError:
        pass
    return _status_error(status, message)


def _json(response: urllib3.BaseHTTPResponse, failure: str) -> Any:
    """The response's body decoded; a :class:`KubeError` starting with ``failure`` when it cannot be
    read whole or is no JSON. The connection goes back to the pool either way."""
    try:
        return json.loads(response.read())
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
        raise KubeError(0, f"{failure}: {err}") from None
    finally:
        response.release_conn()


def _status_error(status: int, message: str) -> KubeError:
    if status == 410:
        return Gone(status, message)
    if status == 404:
        return NotServed(status, message)
    return KubeError(status, message)


class WatchStream:
    """An open watch: iterate for events (``{"type": ..., "object": {...}}``), ``close()`` from any thread."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self._response:
                if not line.strip():
                    continue
                event = json.loads(line)
                if not isinstance(event, dict):
                    raise KubeError(0, f"watch event is not a JSON object: {line[:80]!r}")
                yield event
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise KubeError(0, f"watch connection lost: {err}") from None
        except ValueError as err:
            raise KubeError(0, f"watch stream is not JSON lines: {err}") from None

    def close(self) -> None:
        """Unblock a reader waiting for the next event (it sees the stream end) and drop the connection."""
        with suppress(ValueError, RuntimeError, OSError):  # already released: nothing waits on it
            self._response.shutdown()
        self._response.close()


class KubeReader:
    """Lists and watches of :class:`ApiResource` collections on one API client."""

    def __init__(self, api: ApiClient, page_size: int = 500) -> None:
        self._api = api
        self._page_size = page_size

    def _get(self, path: str, query: dict[str, str], read_timeout: float) -> urllib3.BaseHTTPResponse:
        from kubernetes.client.exceptions import ApiException

        params = self._api.param_serialize(
            method="GET",
            resource_path=path,
            query_params=list(query.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            answer = self._api.call_api(*params, _request_timeout=(CONNECT_TIMEOUT, read_timeout))
        except ApiException as err:  # raised for TLS failures, as status 0
            if err.status:
                raise _status_error(err.status, str(err.reason)) from None
            raise self._unreachable(err.reason) from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise self._unreachable(err) from None
        response: urllib3.BaseHTTPResponse = answer.response
        if response.status != 200:
            try:
                body = response.read()
            except (urllib3.exceptions.HTTPError, OSError):
                body = b""
            response.close()
            raise _error(response.status, body, str(response.reason))
        return response

    def _unreachable(self, err: object) -> KubeError:
        host = self._api.configuration.host
        return KubeError(0, f"cannot reach the API server at {host}: {_root_cause(err)}")

    def version(self) -> dict[str, Any]:
        """``GET /version``: what any client may ask, so it tells whether the server answers at all."""
        answer = _json(self._get("/version", {}, CONNECT_TIMEOUT), "/version did not answer with JSON")
        return answer if isinstance(answer, dict) else {}

    def get(self, resource: ApiResource, namespace: str, name: str) -> dict[str, Any] | None:
        """One object as the API server holds it (``namespace`` "" for a cluster-scoped kind), None
        when there is none (404)."""
        try:
            response = self._get(resource.object_path(namespace, name), {}, LIST_READ_TIMEOUT)
        except NotServed:
            return None
        found = _json(response, f"get of {resource} {name} interrupted")
        return found if isinstance(found, dict) else None

    def list_pages(self, resource: ApiResource) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """``(items, resourceVersion)`` page by page; all pages are one consistent read.

        Items of a list carry no ``apiVersion``/``kind`` (the API server leaves them to the list);
        callers fill them in from ``resource``.
        """
        token = ""
        while True:
            query = {"limit": str(self._page_size)}
            if token:
                query["continue"] = token
            response = self._get(resource.path, query, LIST_READ_TIMEOUT)
            try:
                page = json.loads(response.read())
            except (urllib3.exceptions.HTTPError, OSError) as err:
                raise KubeError(0, f"list of {resource} interrupted: {err}") from None
            except ValueError as err:
                raise KubeError(0, f"list of {resource} is not JSON: {err}") from None
            finally:
                response.release_conn()
            metadata = page.get("metadata") or {}
            yield list(page.get("items") or []), str(metadata.get("resourceVersion", ""))
            token = str(metadata.get("continue") or "")
            if not token:
                return

    def watch(
        self, resource: ApiResource, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchStream:
        """Changes after ``resource_version``, with bookmarks; the server ends it after ``timeout_seconds``.

        A read that waits longer than ``read_timeout`` for a line (the API server sends a bookmark
        about every minute) ends the stream with :class:`KubeError`, so a dead connection is noticed;
        so does a response that has not started within :data:`WATCH_START_TIMEOUT`.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        response = self._get(resource.path, query, WATCH_START_TIMEOUT)
        _reading_waits(response, read_timeout)
        return WatchStream(response)


def _reading_waits(response: urllib3.BaseHTTPResponse, seconds: float) -> None:
    """Let reads of the open stream wait ``seconds``: urllib3 set the socket's timeout to the one
    the request's headers were waited for, and the body is read from the same socket."""
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def status_error(status: dict[str, Any]) -> KubeError:
    """The error carried by a watch ``ERROR`` event (a ``metav1.Status``)."""
    code = status.get("code")
    return _status_error(code if isinstance(code, int) else 0, str(status.get("message") or "watch error"))
