"""How the plugin reaches Watchtower: straight to `--server`, else through the API server's service proxy with
the user's kubeconfig and context (so the user's RBAC decides what they may read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import orjson

from watchtower.adapters.kube.service_proxy import (
    KubeConfigError,
    ServiceProxy,
    Unreachable,
    missing_service,
)

TIMEOUT = 30.0


class PluginError(Exception):
    """What to print after `error: ` before exiting 1, one line."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            raise PluginError(
                f"Watchtower answered HTTP {self.status} with a body that is not JSON"
            ) from None

    def detail(self) -> str:
        """Return the Problem's `detail` (Watchtower's sentence), else the start of the body."""
        try:
            doc = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("detail"), str):
            return str(doc["detail"])
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):  # a metav1.Status
            return str(doc["message"])
        return self.body[:200].decode("utf-8", "replace").strip() or f"HTTP {self.status}"


class Reach(Protocol):
    def get(self, path: str, query: list[tuple[str, str]]) -> Answer: ...


@dataclass
class Direct:
    """A Watchtower at a URL: a port-forward, a test, an Ingress."""

    server: str

    def get(self, path: str, query: list[tuple[str, str]]) -> Answer:
        params: list[tuple[str, str | int | float | bool | None]] = list(query)
        try:
            r = httpx.get(self.server.rstrip("/") + path, params=params, timeout=TIMEOUT)
        except httpx.HTTPError as e:
            raise PluginError(
                f"Watchtower at {self.server} did not answer: {e or type(e).__name__}"
            ) from None
        return Answer(r.status_code, r.content)


@dataclass
class Proxied:
    """Watchtower's Service through the API server kubectl would talk to."""

    proxy: ServiceProxy

    def get(self, path: str, query: list[tuple[str, str]]) -> Answer:
        try:
            a = self.proxy.get(path, query, timeout=TIMEOUT)
        except Unreachable as e:
            raise PluginError(str(e)) from None
        if missing_service(a):
            raise PluginError(
                f"no Watchtower in this cluster: service {self.proxy.namespace}/{self.proxy.service} not found "
                "(install it, point --watchtower-namespace/--watchtower-service at it, or use --local)"
            )
        if a.status in (401, 403) and _is_status(a.body):
            raise PluginError(
                f"{Answer(a.status, a.body).detail()} (reading Watchtower needs get on services/proxy in "
                f"namespace {self.proxy.namespace}: see docs/kubectl.md)"
            )
        if a.status == 503 and _is_status(a.body):
            raise PluginError(
                f"Watchtower's service {self.proxy.namespace}/{self.proxy.service} has no ready endpoint: "
                f"{Answer(a.status, a.body).detail()}"
            )
        return Answer(a.status, a.body)


def _is_status(body: bytes) -> bool:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(doc, dict) and doc.get("kind") == "Status"


def connect(
    *,
    server: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str,
    service: str,
    port: str,
) -> Reach:
    if server:
        return Direct(server)
    try:
        proxy = ServiceProxy.connect(
            kubeconfig=kubeconfig, context=context, namespace=namespace, service=service, port=port
        )
    except KubeConfigError as e:
        raise PluginError(str(e)) from None
    return Proxied(proxy)
