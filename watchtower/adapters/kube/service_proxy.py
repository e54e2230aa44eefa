"""GETs to an in-cluster Service through the API server's service proxy, with the user's kubeconfig.

The proxy path is `/api/v1/namespaces/<ns>/services/<name>:<port>/proxy/<path>`: the API server checks the
user's RBAC (`get` on `services/proxy`) and forwards, so a user sees what their credentials allow. Answers are
returned whatever their status, because a 404 may be the Service's (no Watchtower installed: a metav1.Status)
or Watchtower's own (no such workload: a Problem body); the caller tells them apart with `missing_service`.

The one write is a SelfSubjectAccessReview (`may_list_pods`): the API server answers for the kubeconfig's user
and keeps nothing. The proxy cannot tell Watchtower who asks, so the plugin narrows its answers with these.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote

import msgspec
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from .connection import KubeConfigError, api_client

__all__ = [
    "AccessUnknown",
    "KubeConfigError",
    "ProxyAnswer",
    "ServiceProxy",
    "Unreachable",
    "context_namespace",
    "missing_service",
    "proxy_path",
]


class Unreachable(Exception):
    """The API server did not answer (refused, timed out, TLS failed), said in one line."""


class AccessUnknown(Exception):
    """The API server answered an access review with an error (HTTP status and its message), in one line."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """Return the namespace kubectl would use without -n: the context's, else `default`."""
    listed = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    files = os.pathsep.join(
        p for p in (os.path.expanduser(x) for x in listed.split(os.pathsep) if x) if os.path.exists(p)
    )
    if not files:
        return "default"
    try:
        contexts, active = k8s_config.list_kube_config_contexts(files)  # type: ignore[no-untyped-call]
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        ns = ((chosen or {}).get("context") or {}).get("namespace")
    except Exception:  # a broken kubeconfig is reported when it is used to connect, not here
        return "default"
    return str(ns) if ns else "default"


def proxy_path(namespace: str, service: str, port: str | int, path: str) -> str:
    """Return the API server's proxy path to `path` (starting with /) on the Service's port."""
    ns, svc, p = (quote(str(x), safe="") for x in (namespace, service, port))
    return f"/api/v1/namespaces/{ns}/services/{svc}:{p}/proxy{path}"


@dataclass(frozen=True)
class ProxyAnswer:
    status: int
    body: bytes


class _Status(msgspec.Struct):
    kind: str = ""
    reason: str = ""
    message: str = ""
    details: dict[str, object] | None = None


class _ReviewStatus(msgspec.Struct):
    allowed: bool = False


class _Review(msgspec.Struct):
    status: _ReviewStatus | None = None


def missing_service(answer: ProxyAnswer) -> bool:
    """Return whether a 404 is the API server saying the Service itself does not exist."""
    if answer.status != 404:
        return False
    try:
        s = msgspec.json.decode(answer.body, type=_Status)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    return s.kind == "Status" and s.reason == "NotFound" and (s.details or {}).get("kind") == "services"


@dataclass
class ServiceProxy:
    """Blocking GETs to one Service's port through the API server of the kubeconfig's context, and the user's
    access reviews there."""

    client: k8s.ApiClient
    namespace: str
    service: str
    port: str

    @classmethod
    def connect(
        cls, *, kubeconfig: str | None, context: str | None, namespace: str, service: str, port: str
    ) -> ServiceProxy:
        """Raises KubeConfigError when no kubeconfig (or service account) can be used."""
        return cls(api_client(kubeconfig=kubeconfig, context=context, pool_size=1), namespace, service, port)

    @property
    def host(self) -> str:
        return str(self.client.configuration.host)

    def get(self, path: str, query: list[tuple[str, str]], *, timeout: float) -> ProxyAnswer:
        """Return the status and body of GET `path`; raise Unreachable when the API server does not answer."""
        return self._send(
            "GET", proxy_path(self.namespace, self.service, self.port, path), query, None, timeout
        )

    def may_list_pods(self, namespace: str, *, timeout: float) -> bool:
        """Return whether the kubeconfig's user may list pods in `namespace` ("": in every namespace), by a
        SelfSubjectAccessReview, which every authenticated user may create (ClusterRole system:basic-user).
        Raise Unreachable when the API server does not answer, AccessUnknown when it answers with an error."""
        attributes = {"verb": "list", "resource": "pods", "namespace": namespace}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        a = self._send("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", [], review, timeout)
        if a.status not in (200, 201):
            try:
                why = msgspec.json.decode(a.body, type=_Status).message
            except (msgspec.DecodeError, msgspec.ValidationError):
                why = a.body[:200].decode("utf-8", "replace").strip()
            raise AccessUnknown(f"HTTP {a.status}{f': {why}' if why else ''}", a.status)
        try:
            done = msgspec.json.decode(a.body, type=_Review)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise AccessUnknown(f"the access review's answer is not a SelfSubjectAccessReview: {e}") from None
        return done.status is not None and done.status.allowed

    def _send(
        self, verb: str, path: str, query: list[tuple[str, str]], body: object, timeout: float
    ) -> ProxyAnswer:
        method, url, headers, data, post = self.client.param_serialize(
            verb,
            path,
            query_params=query,
            header_params={"Accept": "application/json"}
            | ({"Content-Type": "application/json"} if body is not None else {}),
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            resp: urllib3.BaseHTTPResponse = self.client.call_api(
                method, url, headers, data, post, _request_timeout=timeout
            ).response
        except urllib3.exceptions.HTTPError as e:
            reason = getattr(e, "reason", None) or e
            raise Unreachable(f"the API server {self.host} did not answer: {reason}") from None
        try:
            return ProxyAnswer(resp.status, resp.read())
        finally:
            resp.release_conn()

    def close(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]
