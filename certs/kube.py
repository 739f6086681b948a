"""Plain-JSON requests to the API server through the ``kubernetes`` client's transport.

The client's typed methods validate a request body into their generated model first, which
(a) drops fields the model does not know, so a read-modify-write of a webhook configuration
would erase fields added by a newer API server, and (b) turns ``metav1.MicroTime`` strings into
``datetime`` and back with ``isoformat()``, which omits the fraction when it is zero and then
fails the API server's RFC 3339-with-microseconds parser. So objects travel as plain JSON here;
the client still provides configuration, authentication and TLS; its errors come back as
:class:`KubeApiError`, so that nothing else in ``certs`` imports the client (its generated models
are 35 MiB, which ``serve --state`` and the offline commands never need).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes.client import ApiClient


class KubeApiError(Exception):
    """The API server refused a request (``status`` its HTTP status; 0 when there was no answer,
    e.g. a TLS failure)."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(f"HTTP {status} {reason}: {body}")
        self.status, self.reason, self.body = status, reason, body


class Kube:
    """GET/POST/PUT of whole objects by API path (``/api/v1/...`` or ``/apis/<group>/<version>/...``)."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        params = self._api.param_serialize(
            method=method, resource_path=path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        try:
            response = self._api.call_api(*params)
        except ApiException as err:  # no answer (TLS, connection): status 0
            raise KubeApiError(err.status or 0, str(err.reason or ""), str(err.body or "")) from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            # The client wraps only a bare TLS error; a connection refused or broken mid-handshake
            # (an API server restarting) comes as urllib3's MaxRetryError. Left through, it ended
            # the rotation thread of every replica, and the serving certificate expired unrenewed
            # (found by benchmarks/soak.py).
            raise KubeApiError(0, type(err).__name__, str(err)) from None
        data: bytes = response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status <= 299:
            raise KubeApiError(response.status, str(response.reason or ""), data.decode("utf-8", "replace"))
        found: dict[str, Any] = json.loads(data)
        return found

    def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or ``None`` if it does not exist (404)."""
        try:
            return self._request("GET", path)
        except KubeApiError as err:
            if err.status == 404:
                return None
            raise

    def create(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``collection``; 409 AlreadyExists raises :class:`KubeApiError`."""
        return self._request("POST", collection, body)

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT ``body``; conditional on ``body.metadata.resourceVersion`` (409 Conflict if stale)."""
        return self._request("PUT", path, body)


def namespaced(group_version: str, namespace: str, plural: str, name: str = "") -> str:
    """The path of a namespaced collection, or of one object in it when ``name`` is given."""
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{root}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path


def cluster(group_version: str, plural: str, name: str) -> str:
    """The path of one cluster-scoped object."""
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{root}/{plural}/{name}"
