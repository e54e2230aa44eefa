"""`kubectl watchtower` through the real kube-apiserver's service proxy, to two real `watchtower run` replicas.

The replicas listen on 127.0.0.1, which the API server refuses as an endpoint, so this module runs its own
control plane whose API server dials proxy targets through connect_proxy.py (its docstring says how and why):
the Service `watchtower/watchtower` has two endpoints with pod addresses (10.244.77.1 and .2, each the IP of a
Pod object the test writes, as the API server checks), and the CONNECT proxy maps them to the replicas' ports.
The session's shared control plane is left untouched: its Kueue webhooks and aggregated API would go through
the same egress. Its cost is one more etcd and API server for this module (start-up printed: 5-8 s here).

The users are real: the admin's client certificate, and a ServiceAccount token whose RBAC lists pods in
`team-a` only and may `get` Watchtower's `services/proxy` (docs/kubectl.md's Role).

Size: the cluster these tests share (its own control plane, the Service with its Pods and EndpointSlice, the
RBAC of a one-namespace user, two replicas) is set up here once for all five; apart, each would repeat it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.connect_proxy import ConnectProxy, egress_selector_config
from tests.e2e.controlplane.cluster import ControlPlane, binaries_dir, tls_context
from tests.e2e.failover import Replica
from tests.e2e.identity import token_kubeconfig
from tests.e2e.scenario import PRIORITY_CLASSES, pod_manifest

pytestmark = pytest.mark.e2e

HOME, MINE, THEIRS = "watchtower", "team-a", "team-b"
# Pod addresses the Service's endpoints name; the CONNECT proxy sends each to one replica.
ADDRESSES = ("10.244.77.1", "10.244.77.2")
PORT = 8080
PROXY = f"/api/v1/namespaces/{HOME}/services/{HOME}:{PORT}/proxy"
READER_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {"name": "watchtower-reader", "namespace": HOME},
    "rules": [
        {
            "apiGroups": [""],
            "resources": ["services/proxy"],
            "resourceNames": ["watchtower", "watchtower:8080", "watchtower:http"],
            "verbs": ["get"],
        }
    ],
}


@dataclass
class Cluster:
    cp: ControlPlane
    proxy: ConnectProxy
    admin: Api
    replicas: tuple[Replica, Replica]
    admin_kubeconfig: Path
    alice_kubeconfig: Path  # lists pods in team-a only
    alice_token: str
    workdir: Path

    def admin_http(self) -> httpx.Client:
        p = self.cp.pki
        return httpx.Client(base_url=self.cp.url, verify=tls_context(p.ca_cert, (p.admin_cert, p.admin_key)))


def _config(path: Path, *, kubeconfig: Path, store: Path) -> Path:
    config = {
        "cluster": {"source": "kube", "kubeconfig": str(kubeconfig), "watch_timeout": "60s"},
        "tiers": [
            {"name": "critical", "min_priority": 1_000_000, "warn_after": "1h", "critical_after": "2h"},
            {"name": "high", "min_priority": 900_000, "warn_after": "1h", "critical_after": "2h"},
            {"name": "medium", "min_priority": 500_000, "warn_after": "1h", "critical_after": "2h"},
            {"name": "low", "min_priority": 0, "warn_after": "8h", "critical_after": "9h"},
        ],
        "queue": {"evaluate_every": "1s"},
        "server": {"host": "127.0.0.1", "port": 0, "shutdown_deadline": "5s"},
        "store": {"path": str(store)},
        "leader_election": {
            "enabled": True,
            "lease_namespace": HOME,
            "lease_duration": "6s",
            "renew_deadline": "4s",
            "retry_period": "1s",
        },
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _behind_the_service(admin: Api, replicas: tuple[Replica, Replica], proxy: ConnectProxy) -> None:
    """Make the Service, a Pod object per replica holding its address, and the EndpointSlice naming them."""
    endpoints = []
    for replica, ip in zip(replicas, ADDRESSES, strict=True):
        admin.create(
            f"/api/v1/namespaces/{HOME}/pods",
            {
                "metadata": {"name": replica.name, "labels": {"app.kubernetes.io/name": "watchtower"}},
                # A node no kubelet plays: nothing but this test writes the pod's status.
                "spec": {
                    "nodeName": "replica-host",
                    "containers": [{"name": "watchtower", "image": "watchtower"}],
                },
            },
        )
        admin.patch_status(
            f"/api/v1/namespaces/{HOME}/pods/{replica.name}",
            {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}},
        )
        proxy.routes[f"{ip}:{PORT}"] = int(replica.url.rsplit(":", 1)[1])
        endpoints.append(
            {
                "addresses": [ip],
                "conditions": {"ready": True},
                "targetRef": {"kind": "Pod", "namespace": HOME, "name": replica.name},
            }
        )
    admin.create(
        f"/api/v1/namespaces/{HOME}/services",
        {
            "metadata": {"name": HOME},
            "spec": {"ports": [{"name": "http", "port": PORT, "targetPort": PORT}]},
        },
    )
    # No endpoint controller runs: the slice is written as it would write it.
    admin.create(
        f"/apis/discovery.k8s.io/v1/namespaces/{HOME}/endpointslices",
        {
            "metadata": {"name": f"{HOME}-replicas", "labels": {"kubernetes.io/service-name": HOME}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": PORT, "protocol": "TCP"}],
            "endpoints": endpoints,
        },
    )


def _alice(admin: Api) -> str:
    """Make ServiceAccount team-a/alice, who may list pods in team-a and read Watchtower; return her token."""
    admin.create(f"/api/v1/namespaces/{MINE}/serviceaccounts", {"metadata": {"name": "alice"}})
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    admin.create(
        f"{rbac}/namespaces/{MINE}/roles",
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
    )
    alice = [{"kind": "ServiceAccount", "name": "alice", "namespace": MINE}]
    admin.create(
        f"{rbac}/namespaces/{MINE}/rolebindings",
        {
            "metadata": {"name": "alice-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": alice,
        },
    )
    admin.create(f"{rbac}/namespaces/{HOME}/roles", READER_ROLE)
    admin.create(
        f"{rbac}/namespaces/{HOME}/rolebindings",
        {
            "metadata": {"name": "watchtower-readers"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watchtower-reader"},
            "subjects": alice,
        },
    )
    return str(
        admin.create(
            f"/api/v1/namespaces/{MINE}/serviceaccounts/alice/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )["status"]["token"]
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("egress")
    # A Unix socket's path must stay under 108 bytes, whatever --basetemp says: a short directory of its own.
    sockdir = Path(tempfile.mkdtemp(prefix="wt-egress-"))
    proxy = ConnectProxy(sockdir / "egress.sock").start()
    (workdir / "cp").mkdir()
    cp = ControlPlane(
        workdir / "cp",
        binaries_dir(),
        egress_selector_config=egress_selector_config(workdir / "egress.yaml", sockdir / "egress.sock"),
    )
    replicas: list[Replica] = []
    try:
        cp.start()
        print(f"\negress control plane up in {cp.startup_seconds:.1f}s; logs in {cp.workdir}")
        p = cp.pki
        admin = Api(cp.url, ca=p.ca_cert, cert=(p.admin_cert, p.admin_key))
        for name, value, policy in PRIORITY_CLASSES:
            admin.create(
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy},
            )
        for ns in (HOME, MINE, THEIRS):
            admin.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            wait_for(
                f"{ns}'s default ServiceAccount",
                functools.partial(_exists, admin, f"/api/v1/namespaces/{ns}/serviceaccounts/default"),
                timeout=30,
            )
        # No node exists: each waits, unschedulable, for as long as the module runs.
        admin.create(
            f"/api/v1/namespaces/{MINE}/pods", pod_manifest("train-a", gpus=8, priority_class="batch")
        )
        admin.create(
            f"/api/v1/namespaces/{THEIRS}/pods", pod_manifest("train-b", gpus=4, priority_class="experiment")
        )
        config = _config(
            workdir / "watchtower.yaml", kubeconfig=cp.kubeconfig, store=workdir / "watchtower.db"
        )
        a = Replica("replica-a", config, workdir).start()
        replicas.append(a)
        wait_for("replica-a leading", a.leads, timeout=30)
        b = Replica("replica-b", config, workdir).start()
        replicas.append(b)
        wait_for("replica-b following", lambda: (b.leadership() or {}).get("role") == "follower", timeout=30)
        pair = (a, b)
        _behind_the_service(admin, pair, proxy)
        token = _alice(admin)
        alice = token_kubeconfig(workdir / "alice.kubeconfig", server=cp.url, ca=p.ca_cert, token=token)
        c = Cluster(cp, proxy, admin, pair, cp.kubeconfig, alice, token, workdir)
        with c.admin_http() as web:
            # The API server learns of the slice from its informer: the first proxied answers take a moment.
            wait_for(
                "the service proxy to reach a replica", lambda: web.get(f"{PROXY}/healthz").status_code == 200
            )
        yield c
        admin.close()
    finally:
        for r in replicas:
            r.stop()
        cp.stop()
        proxy.stop()
        sockdir.rmdir()


def _exists(api: Api, path: str) -> bool:
    try:
        api.get(path)
    except ApiError as e:
        if e.status == 404:
            return False
        raise
    return True


def plugin(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run the module the console script `kubectl-watchtower` runs, as its own process (no $KUBECONFIG)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "watchtower.commands.kubectl.app", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        input=stdin.decode() if stdin is not None else None,
    )


def ok(*args: str, stdin: bytes | None = None) -> str:
    r = plugin(*args, stdin=stdin)
    assert r.returncode == 0, r.stderr
    return r.stdout


def names(table: str) -> set[tuple[str, str]]:
    return {(line.split()[0], line.split()[1]) for line in table.splitlines()[1:]}


def test_an_admin_reads_every_namespace_through_the_real_service_proxy(cluster: Cluster) -> None:
    kc = str(cluster.admin_kubeconfig)
    queue = wait_for(
        "both waiting pods in the queue",
        lambda: (
            (out := ok("--kubeconfig", kc, "queue", "-A"))
            and {(MINE, "train-a"), (THEIRS, "train-b")} <= names(out)
            and out
        ),
    )
    assert queue.splitlines()[0].split()[:3] == ["NAMESPACE", "NAME", "KIND"]
    why = ok("--kubeconfig", kc, "why", "train-b", "-n", THEIRS)
    assert "Name:        team-b/train-b" in why and "State:       pending for " in why
    doc = json.loads(ok("--kubeconfig", kc, "why", "train-b", "-n", THEIRS, "-o", "json"))
    assert doc["workload"]["gpus_requested"] == 4
    teams = {line.split()[0] for line in ok("--kubeconfig", kc, "teams").splitlines()[2:]}
    assert {MINE, THEIRS} <= teams
    # Every read went through the API server's egress to a replica's port.
    assert set(cluster.proxy.dialled) <= {f"{ip}:{PORT}" for ip in ADDRESSES}
    assert not cluster.proxy.refused


def test_a_user_who_may_list_pods_in_one_namespace_sees_only_its_work(cluster: Cluster) -> None:
    kc = str(cluster.alice_kubeconfig)
    wait_for(
        "train-b known to Watchtower",
        lambda: "train-b" in ok("--kubeconfig", str(cluster.admin_kubeconfig), "queue", "-A"),
    )
    assert names(ok("--kubeconfig", kc, "queue", "-A")) == {(MINE, "train-a")}
    assert names(ok("--kubeconfig", kc, "queue", "-n", MINE)) == {(MINE, "train-a")}
    assert "Name:        team-a/train-a" in ok("--kubeconfig", kc, "why", "train-a", "-n", MINE)
    as_json = json.loads(ok("--kubeconfig", kc, "queue", "-A", "-o", "json"))
    assert {w["namespace"] for w in as_json["workloads"]} == {MINE} and as_json["count"] == 1
    # Another namespace's workload, asked by name: kubectl's answer to a Forbidden, in one line.
    for args in (("why", "train-b", "-n", THEIRS), ("queue", "-n", THEIRS)):
        r = plugin("--kubeconfig", kc, *args)
        assert r.returncode == 1 and r.stdout == "", r.stderr
        assert r.stderr.startswith('error: forbidden: you may not list pods in namespace "team-b"'), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    teams = ok("--kubeconfig", kc, "teams")
    assert {line.split()[0] for line in teams.splitlines()[2:]} == {MINE}
    report = json.loads(ok("--kubeconfig", kc, "teams", "-o", "json"))
    assert {t["team"] for t in report["teams"]} == {MINE}


def test_a_raw_get_through_the_proxy_is_not_narrowed_the_role_on_services_proxy_is_the_gate(
    cluster: Cluster,
) -> None:
    """What docs/kubectl.md says of the plugin's narrowing: it is the plugin's, not the API server's."""
    p = cluster.cp.pki
    with httpx.Client(
        base_url=cluster.cp.url,
        verify=tls_context(p.ca_cert),
        headers={"Authorization": f"Bearer {cluster.alice_token}"},
    ) as alice:
        every = alice.get(f"{PROXY}/api/v1/queue", params={"state": "waiting"})
        assert every.status_code == 200
        assert THEIRS in {w["namespace"] for w in every.json()["workloads"]}
        # Without the Role's resource names she is refused by the API server itself.
        other = alice.get(f"/api/v1/namespaces/{HOME}/services/other:{PORT}/proxy/api/v1/queue")
        assert other.status_code == 403


def test_with_no_watchtower_installed_one_line_and_local_reads_what_the_user_may_read(
    cluster: Cluster,
) -> None:
    kc = str(cluster.alice_kubeconfig)
    r = plugin(
        "--kubeconfig", str(cluster.admin_kubeconfig), "--watchtower-namespace", "nowhere", "queue", "-A"
    )
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("error: no Watchtower in this cluster: service nowhere/watchtower not found")
    assert len(r.stderr.strip().splitlines()) == 1
    # Where nothing grants her services/proxy, the API server refuses before it looks for a Service.
    r = plugin("--kubeconfig", kc, "--watchtower-namespace", MINE, "why", "train-a", "-n", MINE)
    assert r.returncode == 1 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("error: ") and "services/proxy" in r.stderr and "--local" in r.stderr
    # What `kubectl get pods -n team-a -o json` gives her: a List whose items carry their kind.
    p = cluster.cp.pki
    with httpx.Client(
        base_url=cluster.cp.url,
        verify=tls_context(p.ca_cert),
        headers={"Authorization": f"Bearer {cluster.alice_token}"},
    ) as alice:
        assert alice.get(f"/api/v1/namespaces/{THEIRS}/pods").status_code == 403
        pods = alice.get(f"/api/v1/namespaces/{MINE}/pods")
        pods.raise_for_status()
    dump = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [{"apiVersion": "v1", "kind": "Pod", **i} for i in pods.json()["items"]],
        }
    ).encode()
    local = ok(
        "--kubeconfig",
        kc,
        "--watchtower-namespace",
        MINE,
        "queue",
        "-A",
        "--local",
        "--objects",
        "-",
        stdin=dump,
    )
    assert names(local) == {(MINE, "train-a")}
    why = ok("why", "train-a", "-n", MINE, "--local", "--objects", "-", stdin=dump)
    assert "Name:        team-a/train-a" in why


def test_reads_through_the_service_spread_over_both_replicas_and_the_followers_answers_are_current(
    cluster: Cluster,
) -> None:
    a, b = cluster.replicas
    # deploy/base's readinessProbe: the follower is ready too, so the endpoint controller would list both.
    for r in (a, b):
        assert httpx.get(f"{r.url}/readyz", timeout=5).status_code == 200, r.name
    identities = {r.name: (r.leadership() or {}).get("identity") for r in (a, b)}
    leader = next(r.name for r in (a, b) if r.leads())
    follower = ({a.name, b.name} - {leader}).pop()
    cluster.admin.create(
        f"/api/v1/namespaces/{MINE}/pods", pod_manifest("late-a", gpus=2, priority_class="batch")
    )
    made = time.time()
    answered: Counter[str] = Counter()
    seen_by: dict[str, float] = {}
    reads = 0
    with cluster.admin_http() as web:
        # The API server picks an endpoint at random per request (apiserver pkg/util/proxy RandomEndpoint).
        while reads < 60 or len(seen_by) < 2:
            assert time.time() - made < 30, f"after {reads} reads: {answered}, new pod seen by {seen_by}"
            r = web.get(f"{PROXY}/api/v1/queue", params={"state": "waiting", "namespace": MINE})
            assert r.status_code == 200, r.text
            reads += 1
            who = next(n for n, i in identities.items() if i == r.headers["X-Watchtower-Replica"])
            answered[who] += 1
            if who not in seen_by and "late-a" in {w["name"] for w in r.json()["workloads"]}:
                seen_by[who] = time.time() - made
    print(f"\n{reads} reads through the service proxy: {dict(answered)}; late-a seen after {seen_by} s")
    assert answered[leader] >= 10 and answered[follower] >= 10, answered
    # The follower evaluates too: its picture has the new pod within a few of its ticks, as the leader's does.
    assert seen_by[follower] < 10 and seen_by[leader] < 10, seen_by
