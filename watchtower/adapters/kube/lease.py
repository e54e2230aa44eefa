"""The leader Lease (`coordination.k8s.io/v1`) on the wire: get, create, update, as blocking calls.

The one object Watchtower writes. The released Python client has no Lease lock, so this speaks the REST
calls itself, through the same client (auth, TLS, pool) the watches use: an update carries the
`resourceVersion` it read, so two replicas racing for the Lease cannot both win (the loser gets 409).
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from kubernetes import client as k8s

from watchtower.domain.leader import LeaseConflict, LeaseRecord

from .connection import SERVICE_ACCOUNT, ApiStatus, status_error

PATH = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def pod_namespace(mount: str = SERVICE_ACCOUNT) -> str | None:
    """Return the pod's namespace from its service-account mount; None outside a pod."""
    try:
        return Path(mount, "namespace").read_text().strip() or None
    except OSError:
        return None


def pod_name() -> str:
    """Return this replica's name: `POD_NAME` (the downward API), else the host name (a pod's is its name)."""
    return os.environ.get("POD_NAME", "").strip() or socket.gethostname()


def micro_time(t: float) -> str:
    """Return a MicroTime (RFC 3339 with microseconds, UTC), as the API server stores it."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(v: Any) -> float | None:
    if not isinstance(v, str) or not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _number(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def record_of(obj: Any) -> LeaseRecord:
    """Return the domain's view of a Lease object; a field missing or malformed reads as unset."""
    if not isinstance(obj, dict):
        raise ValueError("a Lease is a JSON object")
    spec, meta = obj.get("spec"), obj.get("metadata")
    spec = spec if isinstance(spec, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    holder = spec.get("holderIdentity")
    return LeaseRecord(
        holder=holder if isinstance(holder, str) else "",
        duration=float(_number(spec.get("leaseDurationSeconds"))),
        acquire_time=_parse_time(spec.get("acquireTime")),
        renew_time=_parse_time(spec.get("renewTime")),
        transitions=_number(spec.get("leaseTransitions")),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def lease_object(name: str, namespace: str, r: LeaseRecord) -> dict[str, Any]:
    """Return the Lease object that says `r` (with its resourceVersion when it has one)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if r.resource_version:
        meta["resourceVersion"] = r.resource_version
    spec: dict[str, Any] = {
        "holderIdentity": r.holder,
        "leaseDurationSeconds": max(1, int(r.duration)),
        "leaseTransitions": r.transitions,
    }
    if r.acquire_time is not None:
        spec["acquireTime"] = micro_time(r.acquire_time)
    if r.renew_time is not None:
        spec["renewTime"] = micro_time(r.renew_time)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


class LeaseClient:
    """One named Lease in one namespace; every call blocks (run it off the event loop)."""

    def __init__(self, client: k8s.ApiClient, *, name: str, namespace: str, timeout: float = 5.0) -> None:
        self.client, self.name, self.namespace = client, name, namespace
        self.collection = PATH.format(namespace=namespace)
        self.timeout = (min(timeout, 3.0), timeout)
        self.where = f"Lease {namespace}/{name}"

    def get(self) -> LeaseRecord | None:
        """Return the Lease, or None when there is none."""
        try:
            return record_of(self._call("GET", f"{self.collection}/{self.name}"))
        except ApiStatus as e:
            if e.code == 404:
                return None
            raise

    def create(self, r: LeaseRecord) -> LeaseRecord:
        """Create the Lease as `r`; raise LeaseConflict when another replica created it first."""
        return self._write("POST", self.collection, r)

    def update(self, r: LeaseRecord) -> LeaseRecord:
        """Replace the Lease with `r` if it is still at `r.resource_version`; raise LeaseConflict if not."""
        return self._write("PUT", f"{self.collection}/{self.name}", r)

    def _write(self, method: str, path: str, r: LeaseRecord) -> LeaseRecord:
        try:
            return record_of(self._call(method, path, lease_object(self.name, self.namespace, r)))
        except ApiStatus as e:
            if e.code == 409:
                raise LeaseConflict(f"{self.where}: {e.message or e.reason}") from None
            raise

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        m, url, hdrs, _, post = self.client.param_serialize(
            method, path, header_params=headers, auth_settings=["BearerToken"]
        )
        resp = self.client.call_api(m, url, hdrs, body, post, _request_timeout=self.timeout).response
        try:
            data = resp.read()
        finally:
            resp.release_conn()
        if not 200 <= resp.status < 300:
            raise status_error(resp.status, data)
        return orjson.loads(data)
