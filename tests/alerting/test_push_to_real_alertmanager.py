"""The push into a real Alertmanager, Debian's 0.25 and 0.35 built from its Go module, configured by the
generated configuration (alerts/alertmanager.py) to route to the test's webhook receiver: Watchtower's
evaluation → outbox → delivery → Alertmanager → the receiver. Wall-clock time throughout: Alertmanager
judges `endsAt` by its own clock."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from alerts.alertmanager import alertmanager_config
from tests.alerting.alertmanager import Alertmanager, binaries
from tests.alerting.helpers import Clock, pending, settings, snapshot
from tests.alerting.servers import Receiver
from watchtower.adapters.senders import build_senders
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.domain.alerts.model import fingerprint
from watchtower.domain.alerts.push import PUSH_LABELS, pushed_labels
from watchtower.domain.health import HEALTHY
from watchtower.domain.tick import Tick
from watchtower.services.alerting import DeliveryWorker, build_alerting
from watchtower.simulator import objects as o

FLAVOURS = ["debian", "current"]
EXTERNAL = "https://watchtower.example"


def push_settings(urls: list[str], hook: str, **route):
    return settings(
        {
            "route": {
                "receiver": "hook",
                "group_by": ["alertname", "namespace"],
                "group_wait": "1s",
                "group_interval": "2s",
                "repeat_interval": "4h",
                **route,
            },
            "receivers": [{"name": "hook", "webhooks": [{"url": hook}]}],
            "alertmanagers": urls,
            "delivery": {"mode": "alertmanager", "backoff_base": "0.2s", "backoff_cap": "1s", "jitter": 0},
            "push": {"resend_interval": "1s"},
        },
        server={"external_url": EXTERNAL},
        queue={"evaluate_every": "1s"},
    )


class Rig:
    """Watchtower's alerting with its outbox and delivery worker, pushing to the Alertmanagers."""

    def __init__(self, s, tmp_path: Path) -> None:
        self.s, self.clock = s, Clock(time.time())
        self.store = SQLiteAlertStore(tmp_path / "alerts.db")
        self.http = httpx.AsyncClient()
        self.svc = build_alerting(settings=s, store=self.store)
        self.worker = DeliveryWorker(
            store=self.store,
            senders=build_senders(s.alerting, http=self.http),
            clock=self.clock,
            cfg=s.alerting,
            rnd=lambda: 0.5,
        )

    async def tick(self, objs) -> None:
        self.clock.t = time.time()
        snap, _ = snapshot(objs, self.clock.t, self.s)
        await self.svc.on_tick(Tick(at=self.clock.t, snapshot=snap, health=HEALTHY))
        self.clock.t = time.time()
        await self.worker.drain()

    async def until(self, done, objs, timeout: float = 20.0) -> None:
        """Tick (evaluate, push, deliver) every 0.2 s until `done()` holds; fail after `timeout`."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                pytest.fail(f"not within {timeout}s; outbox: {self.store.depth()}")
            await self.tick(objs)
            await asyncio.sleep(0.2)

    async def run_for(self, seconds: float, objs) -> None:
        """Go on evaluating and pushing for `seconds`, as the service does (pushes keep alerts valid)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await self.tick(objs)
            await asyncio.sleep(0.2)

    async def close(self) -> None:
        await self.http.aclose()
        self.store.close()


def am_config(s, tmp_path: Path) -> Path:
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(alertmanager_config(s)))
    return path


def received(receiver: Receiver, status: str = "firing") -> dict[str, dict]:
    """Return workload → the alert as Alertmanager last notified it with this status."""
    out = {}
    for r in receiver.requests:
        for a in r["body"]["alerts"]:
            if a["status"] == status:
                out[a["labels"].get("workload", "")] = a
    return out


@pytest.fixture
def receiver():
    r = Receiver("whsec_" + "A" * 24)
    yield r
    r.stop()


@pytest.fixture(params=FLAVOURS)
def flavour(request) -> str:
    return request.param


async def _start(flavour, tmp_path, receiver, *, n=1, **route):
    exe, amtool = binaries(flavour)
    # Ports first, then the configuration that names them, then the processes.
    ams = []
    for i in range(n):
        peers = tuple(a.peer for a in ams)
        ams.append(Alertmanager(exe, tmp_path / "am.yml", tmp_path / f"am{i}", peers=peers, cluster=n > 1))
    s = push_settings([a.url for a in ams], receiver.url, **route)
    am_config(s, tmp_path).rename(tmp_path / "am.yml")
    for a in ams:
        a.start()
    return s, ams, amtool


async def test_a_pushed_alert_arrives_through_alertmanager_with_watchtowers_labels(
    flavour, tmp_path, receiver
):
    s, (am,), _ = await _start(flavour, tmp_path, receiver)
    rig = Rig(s, tmp_path)
    try:
        objs = [pending("job-a", "critical", time.time() - 6 * 60)]
        await rig.until(lambda: "job-a" in received(receiver), objs)
        a = received(receiver)["job-a"]
        assert set(a["labels"]) == {"alertname", "severity", "tier", "team", "namespace", "workload", "kind"}
        assert a["labels"]["alertname"] == "WorkloadWaitWarning" and a["labels"]["tier"] == "critical"
        assert a["labels"]["kind"] == "Pod"
        # The values that change while it fires travel as annotations, beside the rule's own.
        assert a["annotations"]["gpus"] == "8" and "kind" not in a["annotations"]
        assert a["annotations"]["summary"]
        assert a["generatorURL"] == f"{EXTERNAL}/workloads/team-a/job-a?kind=Pod"
        # The same alert in both: Alertmanager's fingerprint and group key are the ones Watchtower computes.
        assert a["fingerprint"] == fingerprint(a["labels"])
        body = receiver.requests[-1]["body"]
        route = s.alerting.route_tree()
        assert body["groupKey"] == route.alertmanager_group_key(route.group_labels(a["labels"]))
        assert body["receiver"] == "hook"
    finally:
        await rig.close()
        am.stop()


async def test_a_silence_made_with_amtool_mutes_the_alert(flavour, tmp_path, receiver):
    s, (am,), amtool = await _start(flavour, tmp_path, receiver)
    done = subprocess.run(
        [amtool, f"--alertmanager.url={am.url}", "silence", "add", "workload=job-quiet", "--comment=test",
         "--author=tests", "--duration=1h"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rig = Rig(s, tmp_path)
    try:
        objs = [pending(n, "critical", time.time() - 6 * 60, ns=n) for n in ("job-quiet", "job-loud")]
        await rig.until(lambda: "job-loud" in received(receiver), objs)
        await rig.run_for(3, objs)  # past a group_interval: a muted alert would have been sent by now
        assert "job-quiet" not in received(receiver)
        alerts = httpx.get(am.url + "/api/v2/alerts").json()
        quiet = [x for x in alerts if x["labels"]["workload"] == "job-quiet"]
        assert quiet and quiet[0]["status"]["state"] == "suppressed"  # Alertmanager has it, silenced
    finally:
        await rig.close()
        am.stop()


async def test_the_resolve_reaches_the_receiver(flavour, tmp_path, receiver):
    s, (am,), _ = await _start(flavour, tmp_path, receiver)
    rig = Rig(s, tmp_path)
    try:
        objs = [pending("job-a", "critical", time.time() - 6 * 60)]
        await rig.until(lambda: "job-a" in received(receiver), objs)
        resolved_at = time.time()
        await rig.until(lambda: "job-a" in received(receiver, "resolved"), [])
        ended = received(receiver, "resolved")["job-a"]["endsAt"]
        # endsAt is the resolve time Watchtower sent, not when Alertmanager timed the alert out.
        from datetime import datetime

        assert abs(datetime.fromisoformat(ended).timestamp() - resolved_at) < 2
    finally:
        await rig.close()
        am.stop()


async def test_alertmanager_killed_and_restarted_loses_nothing(flavour, tmp_path, receiver):
    s, (am,), _ = await _start(flavour, tmp_path, receiver, group_wait="3s")
    rig = Rig(s, tmp_path)
    try:
        first = [pending("job-a", "critical", time.time() - 6 * 60)]
        await rig.tick(first)
        assert httpx.get(am.url + "/api/v2/alerts").json()  # it has the alert...
        am.stop(9)  # ...and dies before its group_wait, holding it only in memory
        both = first + [pending("job-b", "critical", time.time() - 6 * 60)]
        for _ in range(5):  # Watchtower goes on while it is down: the pushes wait in the outbox
            await rig.tick(both)
            await asyncio.sleep(0.2)
        assert sum(rig.store.depth().values()) > 0
        am.start()
        await rig.until(lambda: {"job-a", "job-b"} <= set(received(receiver)), both)
        await rig.until(lambda: {"job-a", "job-b"} <= set(received(receiver, "resolved")), [])
    finally:
        await rig.close()
        am.stop()


async def test_two_clustered_replicas_each_get_every_alert_and_notify_once(flavour, tmp_path, receiver):
    s, ams, _ = await _start(flavour, tmp_path, receiver, n=2)
    rig = Rig(s, tmp_path)
    try:
        objs = [pending(f"job-{i}", "critical", time.time() - 6 * 60) for i in range(3)]
        await rig.until(lambda: len(received(receiver)) == 3, objs)
        for am in ams:
            names = {x["labels"]["workload"] for x in httpx.get(am.url + "/api/v2/alerts").json()}
            assert names == {"job-0", "job-1", "job-2"}
        await rig.run_for(5, objs)  # past the second replica's peer timeout: it would have sent by now
        firing = [r for r in receiver.requests if r["body"]["status"] == "firing"]
        assert len(firing) == 1, [r["body"]["groupKey"] for r in firing]
    finally:
        await rig.close()
        for am in ams:
            am.stop()


def test_pushed_labels_keep_the_identity_and_move_values_to_annotations():
    labels = {"alertname": "W", "severity": "warning", "tier": "high", "team": "t", "namespace": "n",
              "workload": "w", "kind": "Job", "gpus": "8", "priority_class": "p"}  # fmt: skip
    keep, rest = pushed_labels(labels)
    assert keep == {k: labels[k] for k in PUSH_LABELS if k in labels} and rest == {
        "gpus": "8",
        "priority_class": "p",
    }
    assert keep["kind"] == "Job"


def job_pod(job: str, tier: str, created: float, *, ns: str = "team-a") -> dict:
    """A pending pod of the Job `job` (the workload is the Job, named `job`)."""
    p = pending(f"{job}-x7k2p", tier, created, ns=ns)
    p["metadata"]["ownerReferences"] = [
        o.owner_ref("Job", job, api_version="batch/v1", uid=o.new_uid(f"{ns}/job/{job}"))
    ]
    return p


async def test_two_workloads_of_one_name_and_different_kinds_stay_two_alerts_and_two_groups(
    flavour, tmp_path, receiver
):
    """A bare Pod `train` and the Job `train` in one namespace: two alerts in Alertmanager, and with the
    route grouping per workload, two notifications (the generated group_by carries `kind` too)."""
    s, (am,), _ = await _start(flavour, tmp_path, receiver, group_by=["alertname", "workload"])
    assert yaml.safe_load((tmp_path / "am.yml").read_text())["route"]["group_by"] == [
        "alertname",
        "workload",
        "kind",
    ]
    rig = Rig(s, tmp_path)
    try:
        t = time.time() - 6 * 60
        objs = [pending("train", "critical", t), job_pod("train", "critical", t)]

        def kinds_notified() -> list[str]:
            return sorted(
                a["labels"]["kind"]
                for r in receiver.requests
                for a in r["body"]["alerts"]
                if a["labels"]["workload"] == "train" and a["status"] == "firing"
            )

        await rig.until(lambda: kinds_notified() == ["Job", "Pod"], objs)
        held = [x for x in httpx.get(am.url + "/api/v2/alerts").json() if x["labels"]["workload"] == "train"]
        assert sorted(x["labels"]["kind"] for x in held) == ["Job", "Pod"]
        assert len({x["fingerprint"] for x in held}) == 2
        # One group per workload: each notification holds one of them.
        groups = {r["body"]["groupKey"]: r["body"]["alerts"] for r in receiver.requests}
        assert len(groups) == 2 and all(len(alerts) == 1 for alerts in groups.values())
    finally:
        await rig.close()
        am.stop()
