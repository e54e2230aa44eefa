"""Two `watchtower run` replicas electing a leader on a real Lease, an alert storm, and a receiver that
keeps every delivery: what tests/e2e/test_leader_election.py asserts and bench/failover.py measures.

The replicas share one alert store, as the HA deployment shares PostgreSQL; here both run on one machine
and share one SQLite file (WAL, `BEGIN IMMEDIATE`), which keeps the same contract across processes. The
receiver is webhooks.py's HookReceiver with a `delay`: it checks Standard Webhooks signatures and answers
slowly on purpose (a team's webhook is not instant).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.e2e.api import Api, wait_for
from tests.e2e.scenario import pod_manifest
from tests.e2e.webhooks import Delivery

WARN_AFTER = 3  # seconds: every storm pod crosses its warning this long after it was made
STORM_CLASS = "urgent-debug"  # the critical tier's class
ALERT = "WorkloadWaitWarning"


@dataclass(frozen=True)
class Audit:
    """What a receiver got for a storm: lost, duplicated (beyond idempotency), re-delivered (same id)."""

    expected: int
    delivered: int  # storm workloads with at least one firing notification
    lost: list[tuple[str, str]]
    duplicated: int  # notifications saying what an earlier one said, under a different webhook-id
    redelivered: int  # the same webhook-id again: a receiver drops these by the id
    unsigned: int


def audit(deliveries: list[Delivery], expected: set[tuple[str, str]]) -> Audit:
    """Return what `deliveries` did for the storm's `expected` (namespace, workload) pairs."""
    seen_ids: set[str] = set()
    contents: Counter[Any] = Counter()
    redelivered = 0
    got: set[tuple[str, str]] = set()
    for d in deliveries:
        if d.problem:
            continue
        if d.webhook_id in seen_ids:
            redelivered += 1
            continue
        seen_ids.add(d.webhook_id)
        contents[d.content()] += 1
        got |= {w for w in d.firing(ALERT) if w in expected}
    return Audit(
        expected=len(expected),
        delivered=len(got),
        lost=sorted(expected - got),
        duplicated=sum(n - 1 for n in contents.values()),
        redelivered=redelivered,
        unsigned=sum(1 for d in deliveries if d.problem),
    )


def replica_config(
    path: Path,
    *,
    kubeconfig: Path,
    hook: str,
    secret: str,
    store: Path,
    lease_namespace: str,
    lease: tuple[float, float, float],
) -> Path:
    """Write one replica's configuration: the critical tier warning after WARN_AFTER seconds (its
    critical threshold beyond the test, no inhibition: one alert per storm pod), one group per workload."""
    duration, deadline, retry = lease
    config = {
        "cluster": {"source": "kube", "kubeconfig": str(kubeconfig), "watch_timeout": "60s"},
        "tiers": [
            {
                "name": "critical",
                "min_priority": 1_000_000,
                "classes": [STORM_CLASS],
                "warn_after": f"{WARN_AFTER}s",
                "critical_after": "1h",
            },
            {"name": "high", "min_priority": 900_000, "warn_after": "1h", "critical_after": "2h"},
            {"name": "medium", "min_priority": 500_000, "warn_after": "1h", "critical_after": "2h"},
            {"name": "low", "min_priority": 0, "warn_after": "8h", "critical_after": "9h"},
        ],
        "queue": {"evaluate_every": "1s"},
        "server": {"host": "127.0.0.1", "port": 0, "shutdown_deadline": "10s"},
        "store": {"path": str(store)},
        "leader_election": {
            "enabled": True,
            "lease_namespace": lease_namespace,
            "lease_duration": f"{duration}s",
            "renew_deadline": f"{deadline}s",
            "retry_period": f"{retry}s",
        },
        "alerting": {
            "route": {
                "receiver": "oncall",
                "group_by": ["alertname", "namespace", "workload"],
                "group_wait": "1s",
                "group_interval": "2s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "oncall", "webhooks": [{"url": hook, "secret": secret}]}],
            "inhibit_rules": [],
        },
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class Replica:
    """One `watchtower run` process, started by pid and stopped by pid."""

    name: str
    config: Path
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""

    def start(self) -> Replica:
        exe = Path(sys.executable).with_name("watchtower")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "watchtower.cli"]
        out, err = self.workdir / f"{self.name}.out", self.workdir / f"{self.name}.err"
        env = {**os.environ, "POD_NAME": self.name}
        with out.open("wb") as o, err.open("ab") as e:
            self.proc = subprocess.Popen(
                [*cmd, "run", "--config", str(self.config)], stdout=o, stderr=e, env=env
            )

        def announced() -> str | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            for line in out.read_text().splitlines():
                if "serving at " in line:
                    return line.split("serving at ", 1)[1].strip().rstrip("/")
            return None

        self.url = wait_for(f"{self.name} to announce its URL", announced, timeout=60)
        return self

    def log(self) -> str:
        return "\n".join((self.workdir / f"{self.name}.err").read_text(errors="replace").splitlines()[-40:])

    def leadership(self) -> dict[str, Any] | None:
        """Return /healthz's leadership, or None when the replica does not answer."""
        try:
            return dict(httpx.get(f"{self.url}/healthz", timeout=2).json()["leadership"])
        except (httpx.HTTPError, ValueError, KeyError):
            return None

    def leads(self) -> bool:
        s = self.leadership()
        return s is not None and s["role"] == "leader"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> float:
        """SIGKILL it (no chance to release anything); return when, by time.time()."""
        assert self.proc is not None
        at = time.time()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        return at

    def terminate(self, timeout: float = 30.0) -> tuple[int | None, float]:
        """SIGTERM it and wait; return its exit code (None: still running at `timeout`) and seconds taken."""
        assert self.proc is not None
        t0 = time.monotonic()
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            rc: int | None = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - t0

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def storm(api: Api, namespace: str, pods: int, *, prefix: str = "storm") -> set[tuple[str, str]]:
    """Create `pods` critical pods no node can hold (64 GPUs each); return their (namespace, workload)."""
    made = set()
    for i in range(pods):
        name = f"{prefix}-{i:03d}"
        api.create(
            f"/api/v1/namespaces/{namespace}/pods", pod_manifest(name, gpus=64, priority_class=STORM_CLASS)
        )
        made.add((namespace, name))
    return made


def lease_of(api: Api, namespace: str, name: str = "watchtower") -> dict[str, Any]:
    return dict(api.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")["spec"])
