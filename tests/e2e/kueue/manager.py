"""Kueue's real controller manager (v0.17.0, built from its Go module by build.sh) beside the e2e control plane.

Run as a Deployment would run it, minus the pod: a Configuration file, the admin kubeconfig, leader election
off, webhook / metrics / health / visibility servers on free loopback ports. Kueue's own certificate
management (`internalCertManagement`) is off: it would wait for its Secret to be mounted into the pod and for
conversion webhooks the CRD bases do not declare. Instead the test's CA signs a serving pair for each server.
Two of them are read from fixed absolute paths (/etc/kueue/metrics/certs, /visibility), so the manager runs
in a private mount namespace where those paths hold the pairs (private-mounts.sh); nothing on the host moves.

No admission webhook is registered with the API server (a pod-less manager is not reachable through a Service):
a scenario creates its Jobs already `suspend: true` with the `kueue.x-k8s.io/queue-name` label, which is what
Kueue's Job webhook would have done (pkg/controller/jobs/job/job_webhook.go Default); likewise a plain pod is
created gated, labelled and with Kueue's finalizer (pkg/controller/jobs/pod/pod_webhook.go Default).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.controlplane.cluster import ControlPlane, ControlPlaneError, Process, free_port
from tests.e2e.controlplane.pki import issue_serving_pair

HERE = Path(__file__).resolve().parent
VERSION = "v0.17.0"
# Kueue's own namespace (config namespace): it is excluded from managed jobs by default.
NAMESPACE = "kueue-system"
# config/components/visibility/service.yaml and apiservice_v1beta2.yaml of v0.17.0.
VISIBILITY_SERVICE = "visibility-server"
VISIBILITY_API = "visibility.kueue.x-k8s.io"


def binary() -> Path:
    """Return the kueue binary, building it with build.sh when missing (at once when cached)."""
    env = os.environ.get("WATCHTOWER_KUEUE_BIN")
    if env:
        path = Path(env) / "kueue"
        if not path.exists():
            raise ControlPlaneError(f"WATCHTOWER_KUEUE_BIN={env} lacks kueue")
        return path
    r = subprocess.run([str(HERE / "build.sh")], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise ControlPlaneError(f"kueue build.sh failed (rc={r.returncode}):\n{r.stderr[-4000:]}")
    return Path(r.stdout.strip().splitlines()[-1]) / "kueue"


def _namespace_wrapper() -> list[str]:
    """Return the unshare prefix for a private mount namespace (a user namespace too when not root)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise ControlPlaneError("Kueue's manager needs `unshare` (util-linux) for its certificate paths")
    argv = [unshare, "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        argv[1:1] = ["--user", "--map-root-user"]
    return argv


@dataclass
class KueueManager:
    workdir: Path
    kueue: Path
    cp: ControlPlane
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    visibility_port: int = field(default_factory=free_port)
    process: Process | None = None
    startup_seconds: float = 0.0  # from launch to /readyz 200
    visibility_seconds: float = 0.0  # from launch to the visibility APIService Available
    peak_rss_mib: float | None = None

    @property
    def log(self) -> Path:
        return self.workdir / "kueue.log"

    def config(self) -> Path:
        certs = self.workdir / "certs"
        issue_serving_pair(self.cp.pki, certs / "webhook", "kueue-webhook")
        issue_serving_pair(self.cp.pki, certs / "metrics", "kueue-metrics")
        issue_serving_pair(
            self.cp.pki,
            certs / "visibility",
            "kueue-visibility",
            dns=(f"{VISIBILITY_SERVICE}.{NAMESPACE}.svc",),
        )
        cfg = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(certs / "webhook")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": self.visibility_port},
            # `pod`: the plain-pod integration (issue 30). Its reconciler skips every pod not labelled
            # kueue.x-k8s.io/managed=true (pkg/controller/jobs/pod/pod_controller.go), which without the webhook
            # only test_gated_end_to_end.py's pods are: the other scenarios' pods are not Kueue's.
            "integrations": {"frameworks": ["batch/job", "pod"]},
        }
        path = self.workdir / "kueue-config.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    def start(self, api: Api, *, timeout: float = 120.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.config()
        root = self.workdir / "root"
        root.mkdir(exist_ok=True)
        certs = self.workdir / "certs"
        argv = [
            *_namespace_wrapper(),
            str(HERE / "private-mounts.sh"),
            str(root),
            str(certs / "metrics"),
            str(certs / "visibility"),
            str(self.kueue),
            f"--config={config}",
            f"--kubeconfig={self.cp.kubeconfig}",
        ]
        self.process = Process("kueue", argv, self.log)
        t0 = time.monotonic()
        self.process.start()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if not self.process.alive():
                raise ControlPlaneError(f"kueue exited while starting:\n{self.tail()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2.0).status_code == 200:
                    self.startup_seconds = time.monotonic() - t0
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            self.stop()
            raise ControlPlaneError(f"kueue not ready after {timeout:g}s:\n{self.tail()}")
        try:
            self.register_visibility(api, timeout=max(deadline - time.monotonic(), 30.0))
        except Exception:
            self.stop()
            raise
        self.visibility_seconds = time.monotonic() - t0

    def register_visibility(self, api: Api, *, timeout: float) -> None:
        """Make the visibility API reachable through the API server, as Kueue's manifests do, but for the
        Service: an ExternalName `localhost` (the aggregator resolves it to that host and the APIService's port,
        k8s.io/apiserver pkg/util/proxy ResolveCluster), since Endpoints may not point at loopback."""
        with contextlib.suppress(ApiError):
            api.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        api.create(
            f"/api/v1/namespaces/{NAMESPACE}/services",
            {
                "metadata": {"name": VISIBILITY_SERVICE},
                "spec": {"type": "ExternalName", "externalName": "localhost"},
            },
        )
        for version in ("v1beta2", "v1beta1"):
            api.create(
                "/apis/apiregistration.k8s.io/v1/apiservices",
                {
                    "metadata": {"name": f"{version}.{VISIBILITY_API}"},
                    "spec": {
                        "group": VISIBILITY_API,
                        "version": version,
                        "groupPriorityMinimum": 100,
                        "versionPriority": 100 if version == "v1beta2" else 90,
                        # As upstream's apiservice_v1beta2.yaml: the server's certificate is self-managed.
                        "insecureSkipTLSVerify": True,
                        "service": {
                            "namespace": NAMESPACE,
                            "name": VISIBILITY_SERVICE,
                            "port": self.visibility_port,
                        },
                    },
                },
            )

        def available() -> bool:
            svc = api.get(f"/apis/apiregistration.k8s.io/v1/apiservices/v1beta2.{VISIBILITY_API}")
            return any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (svc.get("status") or {}).get("conditions") or []
            )

        wait_for("Kueue's visibility APIService Available", available, timeout=timeout)

    def stop(self) -> None:
        if self.process is not None:
            self.peak_rss_mib = self.process.peak_rss_mib()
            self.process.stop()

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
