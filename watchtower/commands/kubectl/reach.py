"""How the plugin reaches Watchtower: straight to `--server`, else through the API server's service proxy with
the user's kubeconfig and context (so the user's RBAC decides whether they may read it), and which namespaces'
work the user may be shown (`may_read`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import orjson

from watchtower.adapters.kube.service_proxy import (
    AccessUnknown,
    KubeConfigError,
    ServiceProxy,
    Unreachable,
    missing_service,
)

TIMEOUT = 30.0
# Access reviews one command may send beyond the first (every namespace at once): a queue naming more namespaces
# than this shows the rows of the first ones checked and says how many it left out.
MAX_REVIEWS = 50


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

    def may_read(self, namespace: str) -> bool:
        """Return whether the user may be shown the work of `namespace` ("": of every namespace)."""
        ...

    def unchecked(self) -> int:
        """Return how many namespaces were left unchecked (and so not shown) beyond MAX_REVIEWS."""
        ...


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

    def may_read(self, namespace: str) -> bool:
        # No kubeconfig user to ask about: whoever reaches the URL (a port-forward needs pods/portforward in
        # Watchtower's namespace) reads what Watchtower serves.
        return True

    def unchecked(self) -> int:
        return 0


@dataclass
class Proxied:
    """Watchtower's Service through the API server kubectl would talk to. The proxy does not tell Watchtower
    who asks, so what it answers is narrowed here to the namespaces whose pods the user may list, asked of the
    API server with the user's own credentials, each once per command."""

    proxy: ServiceProxy
    _access: dict[str, bool] = field(default_factory=dict)
    _everywhere: bool | None = None
    _skipped: set[str] = field(default_factory=set)

    def may_read(self, namespace: str) -> bool:
        if self._everywhere is None:
            self._everywhere = self._review("")
        if self._everywhere or not namespace:
            return self._everywhere
        if namespace not in self._access:
            if len(self._access) >= MAX_REVIEWS:
                self._skipped.add(namespace)
                return False
            self._access[namespace] = self._review(namespace)
        return self._access[namespace]

    def unchecked(self) -> int:
        return len(self._skipped)

    def _review(self, namespace: str) -> bool:
        try:
            return self.proxy.may_list_pods(namespace, timeout=TIMEOUT)
        except Unreachable as e:
            raise PluginError(str(e)) from None
        except AccessUnknown as e:
            if e.status == 401:  # kubectl's words for a user the API server does not know
                raise PluginError("You must be logged in to the server (Unauthorized)") from None
            where = f'in namespace "{namespace}"' if namespace else "in every namespace"
            raise PluginError(
                f"the API server could not say whether you may list pods {where}: {e}"
            ) from None

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
                f"namespace {self.proxy.namespace}: see docs/kubectl.md; where no Watchtower is installed, --local "
                "analyses what you may read)"
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
    if kubeconfig and not os.path.exists(os.path.expanduser(kubeconfig)):
        # As kubectl says it; the service's own wording names its configuration key and service account.
        raise PluginError(f"stat {kubeconfig}: no such file or directory")
    try:
        proxy = ServiceProxy.connect(
            kubeconfig=kubeconfig, context=context, namespace=namespace, service=service, port=port
        )
    except KubeConfigError as e:
        raise PluginError(str(e)) from None
    return Proxied(proxy)
