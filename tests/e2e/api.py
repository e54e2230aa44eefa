"""A small synchronous client for the test API server: JSON in, JSON out, errors with their HTTP status.

Plain httpx rather than the official client: the scenarios want the objects exactly as the server serves
them (they are saved as fixtures and fed to `watchtower analyze`), not re-serialised models.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.controlplane.cluster import tls_context
from watchtower.domain.forms.registry import WATCHED

# Where each kind Watchtower reads is listed, and the kind/apiVersion a List item must carry in a dump:
# (kind, collection path, apiVersion, namespaced), from the service's own kinds table. Upstream's and
# Volcano's PodGroup share a kind. JobSet's CRD is not installed in the e2e cluster.
_CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "Node",
        "PriorityClass",
        "VolcanoQueue",
        "DeviceClass",
        "ResourceSlice",
        "ClusterQueue",
        "WorkloadPriorityClass",
    }
)
RESOURCES: tuple[tuple[str, str, str, bool], ...] = tuple(
    (
        k.api_kind or k.name,
        k.path,
        f"{k.group}/{k.version}" if k.group else k.version,
        k.name not in _CLUSTER_SCOPED,
    )
    for k in WATCHED
    if k.name != "JobSet"
)
# Kinds whose CRDs only some sessions install (Kueue's, by the `kueue` fixture on first use): a dump without
# them is what `kubectl get` gives on a cluster without Kueue.
_OPTIONAL = ("/apis/kueue.x-k8s.io/",)
# Cluster-scoped kinds a scenario makes for itself: only its own are dumped.
_OWN = {"Namespace": "namespaces", "Queue": "queues"}


class ApiError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


class Api:
    """One identity talking to one API server (admin client certificate or a bearer token)."""

    def __init__(
        self,
        base_url: str,
        *,
        ca: Path,
        cert: tuple[Path, Path] | None = None,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url
        self._ca, self._cert = ca, cert
        self.http = httpx.Client(
            base_url=base_url,
            verify=tls_context(ca, cert),
            headers=headers,
            timeout=timeout,
        )

    def close(self) -> None:
        self.http.close()

    def with_token(self, token: str) -> Api:
        return Api(self.base_url, ca=self._ca, token=token)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        r = self.http.request(
            method,
            path,
            json=body,
            params=params,
            headers={"Content-Type": content_type} if body is not None else None,
        )
        if r.status_code >= 400:
            raise ApiError(r.status_code, method, path, r.text)
        return r.json() if r.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def create(self, path: str, obj: dict[str, Any]) -> Any:
        return self.request("POST", path, body=obj)

    def patch_status(self, path: str, patch: dict[str, Any]) -> Any:
        return self.request(
            "PATCH", f"{path}/status", body=patch, content_type="application/strategic-merge-patch+json"
        )

    def merge_patch(self, path: str, patch: dict[str, Any]) -> Any:
        return self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    def delete(self, path: str, *, grace: int | None = None, missing_ok: bool = True, **opts: Any) -> Any:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", **opts}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        try:
            return self.request("DELETE", path, body=body)
        except ApiError as e:
            if e.status == 404 and missing_ok:
                return None
            raise

    def items(self, path: str, **params: Any) -> list[dict[str, Any]]:
        """Return every item of a collection, following `continue` pages."""
        out: list[dict[str, Any]] = []
        token = ""
        while True:
            q = {"limit": 500, **params}
            if token:
                q["continue"] = token
            page = self.get(path, **q)
            out.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return out

    def dump(self, namespaces: list[str], *, queues: list[str] | None = None) -> dict[str, Any]:
        """Return a kubectl-style List of what Watchtower reads: cluster-scoped kinds, and the namespaced
        kinds of `namespaces` (other scenarios' leftovers stay out of the picture, and so do Volcano Queues
        other than `queues`)."""
        own = {"namespaces": set(namespaces), "queues": set(queues or ())}
        items: list[dict[str, Any]] = []
        for kind, path, api_version, namespaced in RESOURCES:
            if path.startswith(_OPTIONAL) and not self._served(path):
                continue
            if namespaced:
                objs = [o for ns in namespaces for o in self.items(_in_namespace(path, ns))]
            else:
                objs = self.items(path)
                if kind in _OWN:
                    objs = [o for o in objs if o["metadata"]["name"] in own[_OWN[kind]]]
            for o in objs:
                o["kind"], o["apiVersion"] = kind, api_version
                items.append(o)
        return {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": ""}, "items": items}

    def _served(self, path: str) -> bool:
        try:
            self.get(path, limit=1)
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        return True


def _in_namespace(path: str, ns: str) -> str:
    """Return a namespaced kind's collection in one namespace: /apis/batch/v1/jobs → .../namespaces/ns/jobs."""
    root, _, plural = path.rpartition("/")
    return f"{root}/namespaces/{ns}/{plural}"


def wait_for(what: str, probe: Callable[[], Any], *, timeout: float = 60.0, interval: float = 0.25) -> Any:
    """Return the first truthy result of `probe`, polling; fail with `what` and the last result on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except ApiError as e:
            last = e
        if last and not isinstance(last, Exception):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}"[:2000])
        time.sleep(interval)


def watch_lines(api: Api, path: str, *, resource_version: str, timeout: int) -> Iterator[dict[str, Any]]:
    """Yield watch events of a collection from `resource_version` for at most `timeout` seconds."""
    import json

    params = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": str(timeout)}
    with api.http.stream("GET", path, params=params, timeout=timeout + 10) as r:
        if r.status_code >= 400:
            raise ApiError(r.status_code, "WATCH", path, r.read().decode())
        for line in r.iter_lines():
            if line:
                yield json.loads(line)
