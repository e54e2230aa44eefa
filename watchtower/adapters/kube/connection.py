"""Configuration and HTTP through the official client: kubeconfig or in-cluster, read-only GETs, raw bytes.

Only GET is ever sent (list and watch); responses are returned unread (`urllib3` responses) so the caller
decodes the bytes itself instead of building the client's models.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import msgspec
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

Query = list[tuple[str, str]]


class ApiStatus(Exception):
    """A non-2xx answer from the API server, with the Status object's reason and message when sent."""

    def __init__(self, code: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"HTTP {code} {reason}: {message[:200]}".rstrip(": "))
        self.code, self.reason, self.message = code, reason, message

    @property
    def gone(self) -> bool:
        return self.code == 410 or self.reason in ("Expired", "Gone")


class _Status(msgspec.Struct):
    code: int | None = None
    reason: str = ""
    message: str = ""


_status = msgspec.json.Decoder(_Status)


def status_error(code: int, body: bytes | msgspec.Raw) -> ApiStatus:
    """Return the ApiStatus a metav1.Status body (or any body) describes; `code` is used when it has none."""
    try:
        s = _status.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ApiStatus(code, "", bytes(body[:200]).decode("utf-8", "replace"))
    return ApiStatus(s.code or code, s.reason, s.message)


def api_client(*, kubeconfig: str | None, context: str | None, pool_size: int = 16) -> k8s.ApiClient:
    """Return an ApiClient from a kubeconfig file (and context), or in-cluster when `kubeconfig` is None.

    Raises ConfigException with the client's own explanation when neither works.
    """
    cfg = k8s.Configuration()
    if kubeconfig is None:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        path = os.path.expanduser(kubeconfig)
        if not os.path.exists(path):
            raise ConfigException(f"kubeconfig {path} does not exist")
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=cfg, persist_config=False
        )
    # One long-lived watch connection per kind plus the lists: the default pool would make them queue.
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, pool_size)
    return k8s.ApiClient(cfg)


@dataclass
class Transport:
    """Blocking GETs through the client's connection pool, auth and TLS; call from a worker thread."""

    client: k8s.ApiClient

    def get(self, path: str, query: Query, *, timeout: tuple[float, float]) -> urllib3.BaseHTTPResponse:
        """Return the unread response of a GET; raise ApiStatus for a non-2xx answer."""
        method, url, headers, body, post = self.client.param_serialize(
            "GET",
            path,
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        resp: urllib3.BaseHTTPResponse = self.client.call_api(
            method, url, headers, body, post, _request_timeout=timeout
        ).response
        if not 200 <= resp.status < 300:
            try:
                data = resp.read(64 * 1024)
            finally:
                resp.release_conn()
            raise status_error(resp.status, data)
        return resp

    def close(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]
