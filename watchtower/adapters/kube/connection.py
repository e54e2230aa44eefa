"""Configuration and HTTP through the official client: the cluster kubectl would reach, read-only GETs, raw bytes.

Only GET is ever sent (list and watch); responses are returned unread (`urllib3` responses) so the caller
decodes the bytes itself instead of building the client's models.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import msgspec
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

Query = list[tuple[str, str]]

log = logging.getLogger(__name__)


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


SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
FIX = "set cluster.kubeconfig, KUBECONFIG, or run in a pod with a service account"


class KubeConfigError(Exception):
    """No way to reach the API server, said in one line: what was tried, in order, and how to fix it."""


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:300]


def _contexts(files: str) -> str:
    try:
        names = [c["name"] for c in k8s_config.list_kube_config_contexts(files)[0]]  # type: ignore[no-untyped-call]
    except Exception:  # the file is broken in some other way too: the first error is the one to fix
        return ""
    return f" (it has: {', '.join(names)})" if names else " (it has none)"


def _from_files(cfg: k8s.Configuration, files: str, context: str | None, origin: str) -> None:
    """Load `files` (one path, or several joined by os.pathsep, merged as kubectl does) into `cfg`."""
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=files, context=context, client_configuration=cfg, persist_config=False
        )
    except yaml.YAMLError as e:
        raise KubeConfigError(f"{origin} is not valid YAML: {_one_line(e)}") from None
    except Exception as e:  # the client's ConfigException, a directory, an unreadable file, odd shapes
        if context and f"name {context} in" in str(e):
            raise KubeConfigError(
                f"{origin} has no context {context!r} (cluster.context){_contexts(files)}"
            ) from None
        raise KubeConfigError(f"{origin} cannot be used: {_one_line(e)}") from None


def _context_cluster(files: str, context: str | None) -> str | None:
    """Return the cluster name of `context` (else the current context) in `files`, if it names one."""
    try:
        contexts, active = k8s_config.list_kube_config_contexts(files)  # type: ignore[no-untyped-call]
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        name = ((chosen or {}).get("context") or {}).get("cluster")
    except Exception:  # loaded already: a file odd enough to fail here just gives no name
        return None
    return str(name) if name else None


@dataclass(frozen=True)
class ClusterName:
    """The cluster's name as its configuration gives it, and where that came from (said in the log)."""

    name: str
    origin: str


def _named(cfg: k8s.Configuration, files: str | None, context: str | None, origin: str) -> ClusterName:
    if files is not None:
        name = _context_cluster(files, context)
        if name:
            return ClusterName(name, f"the kubeconfig context's cluster ({origin})")
    host = urllib3.util.parse_url(cfg.host or "").host or "kubernetes"
    return ClusterName(host, f"the API server's host ({origin})")


def _load(cfg: k8s.Configuration, kubeconfig: str | None, context: str | None) -> tuple[str, str | None]:
    """Fill `cfg` the way kubectl finds its cluster; return where the configuration came from, and the
    kubeconfig files read (None: the pod's service account).

    Order: `cluster.kubeconfig`, then `$KUBECONFIG` (its files merged; it replaces ~/.kube/config, as for
    kubectl), then ~/.kube/config, then the pod's service account. A file that exists but is broken is an
    error, not a reason to try the next: it is the one the user meant.
    """
    if kubeconfig:
        path = os.path.expanduser(kubeconfig)
        if not os.path.exists(path):
            raise KubeConfigError(
                f"cluster.kubeconfig {path} does not exist: fix the path, or remove the key to use "
                "KUBECONFIG, ~/.kube/config or the pod's service account"
            )
        origin = f"kubeconfig {path} (cluster.kubeconfig)"
        _from_files(cfg, path, context, origin)
        return origin, path
    tried = ["cluster.kubeconfig (not set)"]
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        found = [
            p for p in (os.path.expanduser(x) for x in listed.split(os.pathsep) if x) if os.path.exists(p)
        ]
        if found:
            origin = f"kubeconfig {os.pathsep.join(found)} (KUBECONFIG)"
            _from_files(cfg, os.pathsep.join(found), context, origin)
            return origin, os.pathsep.join(found)
        tried.append(f"KUBECONFIG={listed} (no such file; ~/.kube/config is not read while it is set)")
    else:
        tried.append("KUBECONFIG (not set)")
        default = os.path.expanduser("~/.kube/config")
        if os.path.exists(default):
            origin = f"kubeconfig {default}"
            _from_files(cfg, default, context, origin)
            return origin, default
        tried.append(f"{default} (no such file)")
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        tried.append("in-cluster service account (KUBERNETES_SERVICE_HOST not set: not in a pod)")
    elif not os.path.exists(f"{SERVICE_ACCOUNT}/token"):
        tried.append(f"in-cluster service account (no token at {SERVICE_ACCOUNT}/token: automount disabled?)")
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            return f"the pod's service account ({SERVICE_ACCOUNT})", None
        except ConfigException as e:
            tried.append(f"in-cluster service account ({SERVICE_ACCOUNT}: {_one_line(e)})")
    raise KubeConfigError(f"no Kubernetes API server to watch: tried {', '.join(tried)}; {FIX}")


def api_client(*, kubeconfig: str | None, context: str | None, pool_size: int = 16) -> k8s.ApiClient:
    """Return an ApiClient for the cluster kubectl would reach (see `_load`), retrying nothing itself.

    Raises KubeConfigError, one line long, when no configuration is found or the one found is broken.
    """
    return named_client(kubeconfig=kubeconfig, context=context, pool_size=pool_size)[0]


def named_client(
    *, kubeconfig: str | None, context: str | None, pool_size: int = 16
) -> tuple[k8s.ApiClient, ClusterName]:
    """Return `api_client`'s client and the cluster's name: the kubeconfig context's cluster, else (in a
    pod) the API server's host."""
    cfg = k8s.Configuration()
    origin, files = _load(cfg, kubeconfig, context)
    log.info("Kubernetes API server %s, from %s", cfg.host, origin)
    # The sources retry with back-off and report each outage once; urllib3's own retries would add three
    # warnings per attempt and triple the time an attempt takes to fail.
    cfg.retries = False
    # One long-lived watch connection per kind plus the lists: the default pool would make them queue.
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, pool_size)
    return k8s.ApiClient(cfg), _named(cfg, files, context, origin)


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
