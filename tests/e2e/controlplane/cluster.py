"""Starts and stops a real control plane on loopback: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, each a child process on free ports with its log in a temporary directory.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.e2e.controlplane.pki import PROXY_CLIENT_NAME, Pki, make_pki

HERE = Path(__file__).resolve().parent
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# Only what Watchtower's scenarios need. node-lifecycle stays out: it would taint the silent fake nodes.
CONTROLLERS = (
    "resourcequota-controller",
    "job-controller",
    # A serving Deployment refused by a quota: its ReplicaSet's FailedCreate (scenario 4).
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "namespace-controller",
    "clusterrole-aggregation-controller",
    # DRA (issue 13): makes a pod's claim from its ResourceClaimTemplate (and writes the pod's
    # status.resourceClaimStatuses), drops a finished pod from a claim's reservedFor and then deallocates it
    # (k8s.io/kubernetes@v1.36.3 pkg/controller/resourceclaim/controller.go). The scheduler allocates.
    "resourceclaim-controller",
)
# Upstream gang scheduling (issue 12), beta and still off by default in v1.37.2 (k8s.io/kubernetes@v1.37.2
# pkg/features/kube_features.go): GenericWorkload serves Workload/PodGroup, keeps a pod's spec.schedulingGroup
# and, since 1.37, alone turns on the GangScheduling plugin (pkg/scheduler/apis/config/v1/default_plugins.go)
# and workload-aware preemption (pkg/scheduler/framework/preemption/preemption.go): 1.36's GangScheduling and
# WorkloadAwarePreemption gates are gone, and naming a gate that does not exist stops the binary. All three
# components get the same gate so that what the server keeps, the scheduler and controllers read.
FEATURE_GATES = "GenericWorkload=true"
# Beta API versions added since 1.24 are not served unless asked for (pkg/controlplane/instance.go
# betaAPIGroupVersionsDisabledByDefault lists scheduling.k8s.io/v1beta1); 1.37 serves Workload and PodGroup at
# v1beta1 (and v1alpha3), no longer at 1.36's v1alpha2.
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"


class ControlPlaneError(RuntimeError):
    pass


def binaries_dir() -> Path:
    """Return the directory holding the four binaries, building them with build.sh when missing."""
    env = os.environ.get("WATCHTOWER_CONTROLPLANE_BIN")
    if env:
        d = Path(env)
        missing = [b for b in BINARIES if not (d / b).exists()]
        if missing:
            raise ControlPlaneError(f"WATCHTOWER_CONTROLPLANE_BIN={d} lacks {', '.join(missing)}")
        return d
    # build.sh returns at once when the binaries for the pinned versions are cached.
    r = subprocess.run([str(HERE / "build.sh")], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise ControlPlaneError(f"build.sh failed (rc={r.returncode}):\n{r.stderr[-4000:]}")
    return Path(r.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tls_context(ca: Path, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """Return a client TLS context trusting `ca` and presenting `cert` (httpx 0.28 wants a context)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Process:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def peak_rss_mib(self) -> float | None:
        """Return the process's peak resident memory so far (VmHWM), while it runs."""
        if self.popen is None:
            return None
        try:
            for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def stop(self, timeout: float = 15.0) -> None:
        p = self.popen
        if p is None or p.poll() is not None:
            return
        os.kill(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout)


@dataclass
class ControlPlane:
    workdir: Path
    bin_dir: Path
    pki: Pki = field(init=False)
    etcd_port: int = field(init=False)
    apiserver_port: int = field(init=False)
    procs: dict[str, Process] = field(default_factory=dict)
    kubeconfig: Path = field(init=False)
    watch_cache: bool = True
    # An EgressSelectorConfiguration file: the API server then dials proxy targets as it says (connect_proxy.py).
    egress_selector_config: Path | None = None
    startup_seconds: float = 0.0  # from nothing to all four ready, certificates included
    peak_rss: dict[str, float] = field(default_factory=dict)  # MiB per process, read when stopped

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def _admin_http(self) -> httpx.Client:
        return httpx.Client(
            verify=tls_context(self.pki.ca_cert, (self.pki.admin_cert, self.pki.admin_key)), timeout=5.0
        )

    # ---- commands ---------------------------------------------------------------------------------

    def _etcd(self) -> Process:
        peer = free_port()
        data = self.workdir / "etcd-data"
        return Process(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=e2e",
                f"--data-dir={data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            self.workdir / "etcd.log",
        )

    def _apiserver(self) -> Process:
        p = self.pki
        argv = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.apiserver_port}",
            "--bind-address=127.0.0.1",
            # Without it the server looks for a host interface with a default route.
            "--advertise-address=127.0.0.1",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            f"--client-ca-file={p.ca_cert}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p.sa_pub}",
            f"--service-account-signing-key-file={p.sa_key}",
            # No node-lifecycle controller runs to lift the not-ready taint this plugin puts on new Nodes.
            "--disable-admission-plugins=TaintNodesByCondition",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            # The `kubernetes` Service endpoint would be 127.0.0.1, which Endpoints validation refuses.
            "--endpoint-reconciler-type=none",
            f"--watch-cache={'true' if self.watch_cache else 'false'}",
            f"--feature-gates={FEATURE_GATES}",
            f"--runtime-config={RUNTIME_CONFIG}",
            # The aggregation layer, for Kueue's visibility API (an APIService): who may set X-Remote-*
            # headers, and the certificate the API server presents to the aggregated server.
            f"--requestheader-client-ca-file={p.ca_cert}",
            f"--requestheader-allowed-names={PROXY_CLIENT_NAME}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p.proxy_cert}",
            f"--proxy-client-key-file={p.proxy_key}",
        ]
        if self.egress_selector_config is not None:
            argv.append(f"--egress-selector-config-file={self.egress_selector_config}")
        return Process("kube-apiserver", argv, self.workdir / "kube-apiserver.log")

    def _controller_manager(self) -> Process:
        return Process(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                "--use-service-account-credentials=false",
                f"--secure-port={free_port()}",
                "--bind-address=127.0.0.1",
                # The garbage collector and quota controller re-read discovery on this period: CRDs made by a
                # scenario are known sooner.
                "--resource-quota-sync-period=10s",
                f"--feature-gates={FEATURE_GATES}",
            ],
            self.workdir / "kube-controller-manager.log",
        )

    def _scheduler(self) -> Process:
        return Process(
            "kube-scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--secure-port={free_port()}",
                "--bind-address=127.0.0.1",
                f"--feature-gates={FEATURE_GATES}",
            ],
            self.workdir / "kube-scheduler.log",
        )

    # ---- lifecycle --------------------------------------------------------------------------------

    def start(self, *, timeout: float = 120.0) -> None:
        t0 = time.monotonic()
        self.pki = make_pki(self.workdir / "pki")
        self.etcd_port = free_port()
        self.apiserver_port = free_port()
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self._write_kubeconfig()
        try:
            self._launch(self._etcd())
            self._wait("etcd", self._etcd_healthy, timeout)
            self._launch(self._apiserver())
            self._wait("kube-apiserver /readyz", self._apiserver_ready, timeout)
            self._launch(self._controller_manager())
            self._launch(self._scheduler())
            self._wait("the default ServiceAccount", self._default_sa, timeout)
            self.startup_seconds = time.monotonic() - t0
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            rss = self.procs[name].peak_rss_mib()
            if rss is not None:
                self.peak_rss[name] = rss
            self.procs[name].stop()

    def restart_apiserver(self, *, watch_cache: bool | None = None, timeout: float = 120.0) -> None:
        """Stop the API server and start it again on the same port (optionally changing the watch cache)."""
        if watch_cache is not None:
            self.watch_cache = watch_cache
        self.procs["kube-apiserver"].stop()
        self._launch(self._apiserver())
        self._wait("kube-apiserver /readyz after restart", self._apiserver_ready, timeout)

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision (old resourceVersions now give 410 Gone); return it."""
        with httpx.Client(timeout=10.0) as c:
            rev = int(
                c.post(f"{self.etcd_url}/v3/kv/range", json={"key": "AA=="}).json()["header"]["revision"]
            )
            c.post(
                f"{self.etcd_url}/v3/kv/compaction", json={"revision": rev, "physical": True}
            ).raise_for_status()
        return rev

    def logs(self, lines: int = 40) -> str:
        return "\n".join(f"---- {p.name} ({p.log}) ----\n{tail(p.log, lines)}" for p in self.procs.values())

    def _launch(self, proc: Process) -> None:
        self.procs[proc.name] = proc
        proc.start()

    def _wait(self, what: str, probe: object, timeout: float) -> None:
        assert callable(probe)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs.values():
                if not p.alive():
                    raise ControlPlaneError(f"{p.name} exited while waiting for {what}:\n{self.logs()}")
            try:
                if probe():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"timed out after {timeout:g}s waiting for {what}:\n{self.logs()}")

    def _etcd_healthy(self) -> bool:
        r = httpx.get(f"{self.etcd_url}/health", timeout=2.0)
        return r.status_code == 200 and r.json().get("health") == "true"

    def _apiserver_ready(self) -> bool:
        with self._admin_http() as c:
            return c.get(f"{self.url}/readyz").status_code == 200

    def _default_sa(self) -> bool:
        # The ServiceAccount admission plugin refuses pods until the controller made `default`.
        with self._admin_http() as c:
            return c.get(f"{self.url}/api/v1/namespaces/default/serviceaccounts/default").status_code == 200

    def _write_kubeconfig(self) -> None:
        p = self.pki
        self.kubeconfig.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: {self.url}
    certificate-authority: {p.ca_cert}
users:
- name: admin
  user:
    client-certificate: {p.admin_cert}
    client-key: {p.admin_key}
contexts:
- name: e2e
  context: {{cluster: e2e, user: admin}}
current-context: e2e
"""
        )
