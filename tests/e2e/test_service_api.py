"""The running service against the real control plane: `watchtower run` as a subprocess, watching the API
server with nothing but the deploy/ ServiceAccount token, asserted through its own HTTP API, its /metrics
and the signed webhooks it sends, against the real objects the scheduler and controllers wrote.

The service reaches the API server through a recording TLS relay (recording_proxy.py), so the test knows
every request it made: GETs only.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.controlplane.cluster import ControlPlane, tail
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.recording_proxy import RecordingProxy
from tests.e2e.scenario import Scenario, pod_manifest
from tests.e2e.webhooks import HookReceiver, new_secret

pytestmark = pytest.mark.e2e

LOW, CRIT, QUOTA, HOME = "e2e-svc-low", "e2e-svc-crit", "e2e-svc-quota", "e2e-svc-watchtower"
WARN_AFTER, CRITICAL_AFTER = 4, 8  # the critical tier's thresholds, seconds
# Victims checkpoint this long: the preemptor waits past both thresholds before it can bind.
CHECKPOINT = 20


def _t(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _condition(pod: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (pod.get("status") or {}).get("conditions", []) if c["type"] == type_), None)


# ---- the service, as a subprocess ------------------------------------------------------------------------


def service_config(
    path: Path,
    *,
    kubeconfig: Path,
    hook: str,
    secret: str,
    store: Path,
    tiers: list[dict[str, Any]] | None = None,
) -> Path:
    """Write the service's configuration: `tiers`, else the critical tier alone alerting within the test."""
    tiers = tiers or [
        {
            "name": "critical",
            "min_priority": 1_000_000,
            "classes": ["urgent-debug"],
            "warn_after": f"{WARN_AFTER}s",
            "critical_after": f"{CRITICAL_AFTER}s",
        },
        # The rest keep thresholds far beyond the test: only the critical wait may alert.
        {"name": "high", "min_priority": 900_000, "warn_after": "1h", "critical_after": "2h"},
        {"name": "medium", "min_priority": 500_000, "warn_after": "1h", "critical_after": "2h"},
        {"name": "low", "min_priority": 0, "warn_after": "8h", "critical_after": "9h"},
    ]
    config = {
        "cluster": {"source": "kube", "kubeconfig": str(kubeconfig), "watch_timeout": "60s"},
        "tiers": tiers,
        "queue": {"evaluate_every": "1s"},
        "server": {"host": "127.0.0.1", "port": 0},
        "store": {"path": str(store)},
        "alerting": {
            "route": {
                "receiver": "e2e-oncall",
                "group_by": ["alertname", "namespace"],
                "group_wait": "1s",
                "group_interval": "2s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "e2e-oncall", "webhooks": [{"url": hook, "secret": secret}]}],
        },
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@contextlib.contextmanager
def service_watching(
    s: Scenario,
    control_plane: ControlPlane,
    *,
    home: str,
    suffix: str,
    tiers: list[dict[str, Any]] | None = None,
) -> Iterator[tuple[httpx.Client, HookReceiver]]:
    """Run the service as deploy/base/rbac.yaml's read-only identity, alerting to a signed webhook receiver; yield
    a client on its API and the receiver. Afterwards: it stopped cleanly and the API server never refused it."""
    with contextlib.ExitStack() as stack:
        identity = apply_rbac(s.api, namespace=home, suffix=suffix)
        stack.callback(identity.remove)
        secret = new_secret()
        hooks = HookReceiver(secret).start()
        stack.callback(hooks.stop)
        kubeconfig = token_kubeconfig(
            s.workdir / "watchtower.kubeconfig",
            server=control_plane.url,
            ca=control_plane.pki.ca_cert,
            token=identity.token(),
        )
        config = service_config(
            s.workdir / "watchtower.yaml",
            kubeconfig=kubeconfig,
            hook=hooks.url,
            secret=secret,
            store=s.workdir / "watchtower.db",
            tiers=tiers,
        )
        with running_service(config, s.workdir) as (url, proc), httpx.Client(base_url=url, timeout=10) as web:
            yield web, hooks
        log = s.workdir / "service.err"
        assert proc.returncode == 0, f"watchtower run did not stop cleanly:\n{tail(log)}"
        assert not re.search(r"HTTP 403|[Ff]orbidden", log.read_text()), tail(log)


@contextlib.contextmanager
def running_service(config: Path, workdir: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start `watchtower run --config`, yield its URL (read from its start-up line) and the process; stop it
    by pid (SIGINT, as Ctrl-C; SIGKILL if it does not go)."""
    exe = Path(sys.executable).with_name("watchtower")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "watchtower.cli"]
    out, err = workdir / "service.out", workdir / "service.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([*cmd, "run", "--config", str(config)], stdout=o, stderr=e)
    try:

        def announced() -> str | None:
            if proc.poll() is not None:
                raise AssertionError(f"watchtower run exited with {proc.returncode}:\n{tail(err)}")
            for line in out.read_text().splitlines():
                if "serving at " in line:
                    return line.split("serving at ", 1)[1].strip().rstrip("/")
            return None

        url = wait_for("watchtower run to announce its URL", announced, timeout=60)
        yield url, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)


def metric(text: str, sample: str, **labels: str) -> float:
    """Return a sample's value in a /metrics text (0 when the series does not exist yet)."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


# ---- the scenario ----------------------------------------------------------------------------------------


def test_running_service_reports_real_preemption_wait_and_quota_through_its_api_and_alerts_once_signed(
    scenario: Scenario, control_plane: ControlPlane
) -> None:
    s, admin, pki = scenario, scenario.api, control_plane.pki
    s.node("gpu-s1", gpus=4)
    s.node("gpu-s2", gpus=4)
    s.namespace(HOME)
    low = s.namespace(LOW, team="vision")
    crit = s.namespace(CRIT, team="oncall")
    quota_ns = s.namespace(QUOTA, team="ads")
    with contextlib.ExitStack() as stack:
        identity = apply_rbac(admin, namespace=HOME, suffix="-e2e-svc")
        stack.callback(identity.remove)
        proxy = RecordingProxy(
            control_plane.apiserver_port, ca=pki.ca_cert, cert=pki.serving_cert, key=pki.serving_key
        ).start()
        stack.callback(proxy.stop)
        secret = new_secret()
        hooks = HookReceiver(secret).start()
        stack.callback(hooks.stop)
        kubeconfig = token_kubeconfig(
            s.workdir / "watchtower.kubeconfig", server=proxy.url, ca=pki.ca_cert, token=identity.token()
        )
        config = service_config(
            s.workdir / "watchtower.yaml",
            kubeconfig=kubeconfig,
            hook=hooks.url,
            secret=secret,
            store=s.workdir / "watchtower.db",
        )
        with running_service(config, s.workdir) as (url, proc), httpx.Client(base_url=url, timeout=10) as web:
            _scenario_through_the_service(s, web, hooks, low=low, crit=crit, quota_ns=quota_ns)
            # Still healthy at the end: nothing it needed was refused.
            ready = web.get("/readyz")
            assert ready.status_code == 200, ready.text
        log = s.workdir / "service.err"
        assert proc.returncode == 0, f"watchtower run did not stop cleanly:\n{tail(log)}"
        assert not re.search(r"HTTP 403|[Ff]orbidden", log.read_text()), tail(log)

        # Every request the service made went through the relay: reads only.
        made = proxy.recorded()
        assert not proxy.problems, proxy.problems
        assert made and [r for r in made if r.method != "GET"] == []
        paths = {r.path for r in made}
        assert {"/api/v1/pods", "/api/v1/events", "/api/v1/nodes", "/api/v1/resourcequotas"} <= paths
        assert any("watch=" in r.target and r.path == "/api/v1/pods" for r in made)

        # The relay does see writes: the same token, one write through it, refused by RBAC, recorded.
        through = Api(proxy.url, ca=pki.ca_cert, token=identity.token())
        stack.callback(through.close)
        with pytest.raises(ApiError) as refused:
            through.create(f"/api/v1/namespaces/{crit}/pods", pod_manifest("intruder", gpus=1))
        assert refused.value.status == 403
        assert [r.method for r in proxy.recorded()[len(made) :]] == ["POST"]


def _scenario_through_the_service(
    s: Scenario, web: httpx.Client, hooks: HookReceiver, *, low: str, crit: str, quota_ns: str
) -> None:
    def ready() -> dict[str, Any] | None:
        r = web.get("/readyz")
        return r.json() if r.status_code == 200 else None

    readiness = wait_for("/readyz 200: every kind listed with the read-only token", ready, timeout=90)
    assert readiness["skipped_objects"] == {}
    errors = {k: v["source"]["last_error"] for k, v in readiness["kinds"].items() if "source" in v}
    assert errors and not any(errors.values()), errors
    before = web.get("/metrics").text
    preempted_before = metric(
        before, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="critical"
    )
    lost_before = metric(
        before, "watchtower_preemption_gpu_hours_lost_total", victim_tier="low", preemptor_tier="critical"
    )
    scheduled_before = (
        metric(before, "watchtower_time_to_schedule_seconds_count", tier="critical"),
        metric(before, "watchtower_time_to_schedule_seconds_sum", tier="critical"),
    )

    # A Job its namespace's quota refuses: it never has a pod, only the controller's FailedCreate.
    s.api.create(
        f"/api/v1/namespaces/{quota_ns}/resourcequotas",
        {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
    )
    wait_for(
        "the quota's status filled in by the controller",
        lambda: (
            s.api.get(f"/api/v1/namespaces/{quota_ns}/resourcequotas/gpu-quota").get("status", {}).get("hard")
        ),
    )
    template = pod_manifest("x", gpus=4, priority_class="experiment")
    del template["metadata"]["name"]
    s.api.create(
        f"/apis/batch/v1/namespaces/{quota_ns}/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "sweep"},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template},
        },
    )

    # Low-tier gangs fill every GPU; a critical job arrives; the real scheduler preempts.
    workers = s.gang(low, "resnet", workers=4, gpus=2, priority_class="batch", terminate_seconds=CHECKPOINT)
    s.wait_running(low, [w["metadata"]["name"] for w in workers])
    time.sleep(3)  # the victims run a while: there is work to lose
    debug = s.gang(crit, "debug", workers=1, gpus=4, priority_class="urgent-debug")[0]
    debug_uid = debug["metadata"]["uid"]

    def preempted() -> list[dict[str, Any]] | None:
        victims = [p for p in s.pods(low) if p["metadata"].get("deletionTimestamp")]
        nominated = s.get_pod(crit, "debug-worker-0")["status"].get("nominatedNodeName")
        if len(victims) == 2 and nominated and len(s.events(low, "Preempted")) == 2:
            return victims
        return None

    victims = wait_for("two victims terminating, the preemptor nominated, two Preempted events", preempted)
    events = {e["involvedObject"]["uid"]: e for e in s.events(low, "Preempted")}
    node = s.get_pod(crit, "debug-worker-0")["status"]["nominatedNodeName"]

    # /api/v1/preemptions: each victim, as the API server recorded it.
    def attributed() -> dict[str, Any] | None:
        doc = web.get("/api/v1/preemptions", params={"namespace": low}).json()
        rows = doc["preemptions"]
        return doc if len(rows) == 2 and all(p["preemptor_uid"] for p in rows) else None

    listed = wait_for("the service listing both victims with their preemptor", attributed, timeout=30)
    by_victim = {p["victim_uid"]: p for p in listed["preemptions"]}
    assert set(by_victim) == {v["metadata"]["uid"] for v in victims} == set(events)
    for v in victims:
        p, uid = by_victim[v["metadata"]["uid"]], v["metadata"]["uid"]
        cond = _condition(v, "DisruptionTarget")
        assert cond is not None and cond["status"] == "True"
        assert p["reason"] == cond["reason"] == "PreemptionByScheduler"
        assert p["victim_name"] == v["metadata"]["name"]
        assert p["victim_workload"] == {"kind": "PaddleJob", "name": "resnet"}
        assert p["victim_tier"] == "low"
        assert p["node"] == v["spec"]["nodeName"] == node
        # The scheduler's event names the preemptor by uid and the node; the service agrees.
        assert debug_uid in events[uid]["message"] and node in events[uid]["message"]
        assert p["preemptor_uid"] == debug_uid
        assert (p["preemptor_namespace"], p["preemptor_name"], p["preemptor_tier"]) == (
            crit,
            "debug-worker-0",
            "critical",
        )
        assert p["gpus"] == 2
        ran = _t(cond["lastTransitionTime"]) - _t(v["status"]["startTime"])
        assert ran >= 3
        assert p["ran_seconds"] == pytest.approx(ran)
        assert p["gpu_hours_lost"] == pytest.approx(2 * ran / 3600, abs=1e-6)

    # /api/v1/queue: the critical job waits, in the scheduler's own words, until its victims are gone.
    def waiting_as_the_pod_says() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
        doc = web.get("/api/v1/queue", params={"namespace": crit, "state": "waiting"}).json()
        pod = s.get_pod(crit, "debug-worker-0")
        cond = _condition(pod, "PodScheduled")
        rows = [w for w in doc["workloads"] if w["name"] == "debug"]
        if rows and cond and cond["status"] == "False" and rows[0]["message"] == cond["message"]:
            return doc, rows[0], pod
        return None

    doc, w, pod = wait_for(
        "the service's queue showing the scheduler's current message", waiting_as_the_pod_says
    )
    assert pod["spec"].get("nodeName") is None, "the preemptor must still be waiting for its victims"
    assert (w["kind"], w["tier"], w["team"], w["state"]) == ("PaddleJob", "critical", "oncall", "pending")
    assert w["scheduling_reason"] == "Unschedulable"
    assert w["nominated_node"] == node
    assert ("Insufficient nvidia.com/gpu", 2) in [(r["reason"], r["nodes"]) for r in w["reasons"]]
    assert w["nodes_total"] == 2
    assert w["gpus_requested"] == 4 and w["pods_pending"] == 1
    assert w["wait_seconds"] == pytest.approx(
        _t(doc["at"]) - _t(pod["metadata"]["creationTimestamp"]), abs=1.5
    )
    assert (w["warn_after_seconds"], w["critical_after_seconds"]) == (WARN_AFTER, CRITICAL_AFTER)

    # The quota-blocked Job, from the real FailedCreate event and ResourceQuota.
    event = wait_for("the Job controller's FailedCreate event", lambda: s.events(quota_ns, "FailedCreate"))[0]

    def quota_blocked() -> dict[str, Any] | None:
        rows = web.get("/api/v1/queue", params={"namespace": quota_ns, "state": "quota_blocked"}).json()
        return next((r for r in rows["workloads"] if r["name"] == "sweep"), None)

    sweep = wait_for("the service showing the Job as quota-blocked", quota_blocked, timeout=30)
    assert "exceeded quota: gpu-quota" in event["message"]
    assert (sweep["kind"], sweep["team"], sweep["gpus_requested"]) == ("Job", "ads", 4)
    assert sweep["quota"]["name"] == "gpu-quota"
    assert sweep["quota"]["requested"] == {"requests.nvidia.com/gpu": "4"}
    assert sweep["quota"]["limited"] == {"requests.nvidia.com/gpu": "2"}

    # The critical wait crossed both thresholds while the victims checkpointed: a signed v4 webhook.
    firing = wait_for(
        "a signed WorkloadWaitCritical webhook for the critical job",
        lambda: hooks.alerts("WorkloadWaitCritical", crit, "firing"),
        timeout=40,
    )
    payload = next(
        d.payload for d in hooks.received() if any(a in firing for a in d.payload.get("alerts", []))
    )
    assert payload["version"] == "4"
    assert payload["receiver"] == "e2e-oncall"
    assert payload["groupLabels"] == {"alertname": "WorkloadWaitCritical", "namespace": crit}
    labels = firing[0]["labels"]
    assert {k: labels[k] for k in ("severity", "tier", "team", "workload", "kind")} == {
        "severity": "critical",
        "tier": "critical",
        "team": "oncall",
        "workload": "debug",
        "kind": "PaddleJob",
    }
    assert int(firing[0]["annotations"]["wait_seconds"]) >= CRITICAL_AFTER

    # The victims gone, the preemptor binds where it was nominated, and leaves the queue.
    def running() -> dict[str, Any] | None:
        p = s.get_pod(crit, "debug-worker-0")
        return p if (p.get("status") or {}).get("phase") == "Running" else None

    bound = wait_for("the preemptor bound and running", running, timeout=60)
    assert bound["spec"]["nodeName"] == node

    def left_the_queue() -> dict[str, Any] | None:
        waiting = web.get("/api/v1/queue", params={"namespace": crit, "state": "waiting"}).json()
        if waiting["total"] != 0:
            return None
        # A tick keeps waiting work only; the workload endpoint works a running one out on request.
        r = web.get(f"/api/v1/workloads/{crit}/debug")
        return r.json() if r.status_code == 200 and r.json()["workload"]["state"] == "running" else None

    after = wait_for("the critical job out of the waiting queue, running", left_the_queue, timeout=30)
    assert after["workload"]["gpus_held"] == 4 and after["workload"]["pods_running"] == 1
    resnet = web.get(f"/api/v1/workloads/{low}/resnet", params={"kind": "PaddleJob"}).json()
    assert (resnet["workload"]["state"], resnet["workload"]["pods_running"]) == ("running", 2)
    assert resnet["workload"]["gpus_held"] == 4
    assert sorted(p["victim_uid"] for p in resnet["preemptions"]) == sorted(by_victim)
    wait_for(
        "the resolved notification for the critical wait",
        lambda: hooks.alerts("WorkloadWaitCritical", crit, "resolved"),
        timeout=30,
    )
    assert len(hooks.alerts("WorkloadWaitCritical", crit, "firing")) == 1, "one alert per workload, sent once"
    assert [d.problem for d in hooks.received() if d.problem] == [], "every delivery signed"

    # /metrics: two preemptions counted once each, the GPU-hours lost, the quota.
    text = web.get("/metrics").text
    preempted = metric(text, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="critical")
    assert preempted - preempted_before == 2
    lost = metric(
        text, "watchtower_preemption_gpu_hours_lost_total", victim_tier="low", preemptor_tier="critical"
    )
    assert lost - lost_before == pytest.approx(sum(p["gpu_hours_lost"] for p in by_victim.values()), abs=1e-5)
    # The critical job's wait, creation to binding, as the API server stamped both.
    waited = _t(_condition(bound, "PodScheduled")["lastTransitionTime"]) - _t(
        bound["metadata"]["creationTimestamp"]
    )
    assert waited >= CRITICAL_AFTER
    assert (
        metric(text, "watchtower_time_to_schedule_seconds_count", tier="critical") - scheduled_before[0] == 1
    )
    assert metric(text, "watchtower_time_to_schedule_seconds_sum", tier="critical") - scheduled_before[
        1
    ] == pytest.approx(waited)
    assert metric(text, "watchtower_quota_gpus_hard", namespace=quota_ns, resourcequota="gpu-quota") == 2
    assert metric(text, "watchtower_quota_gpus_used", namespace=quota_ns, resourcequota="gpu-quota") == 0
