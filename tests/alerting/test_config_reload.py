"""Config hot reload through the real parts: a configuration directory updated the way the kubelet updates a
mounted ConfigMap (a new timestamped directory, then the `..data` symlink swapped onto it), the service's
own wiring (runtime.config_reload.config_reloader), the alert store, the delivery worker and real webhook receivers.

A valid change is applied to what the service does next; a bad one changes nothing it does, and raises
WatchtowerConfigInvalid through the service's own delivery, naming each problem by its YAML path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.alerting.helpers import SECRET, T0, Clock, pending, snapshot
from tests.alerting.servers import Receiver
from tests.fixtures.configmap import ConfigMapMount
from watchtower.adapters.senders import build_senders
from watchtower.bootstrap import build_container
from watchtower.config import read_settings
from watchtower.domain.health import HEALTHY
from watchtower.domain.tick import Tick
from watchtower.runtime.config_reload import config_reloader
from watchtower.services.alerting import DeliveryWorker


def doc(secret_file: Path, url: str, *, route_receiver: str = "hook", critical_warn: str = "5m") -> dict:
    return {
        "tiers": [
            {
                "name": "critical",
                "min_priority": 1_000_000,
                "warn_after": critical_warn,
                "critical_after": "15m",
            },
            {"name": "high", "min_priority": 900_000, "warn_after": "15m", "critical_after": "1h"},
            {"name": "medium", "min_priority": 500_000, "warn_after": "30m", "critical_after": "2h"},
            {"name": "low", "min_priority": 0, "warn_after": "2h", "critical_after": "8h"},
        ],
        "alerting": {
            "route": {
                "receiver": "hook",
                "group_by": ["alertname", "tier"],
                "group_wait": "30s",
                "group_interval": "5m",
                "repeat_interval": "4h",
                "routes": [{"matchers": ['team="nobody"'], "receiver": "hook"}, {"receiver": route_receiver}],
            },
            "receivers": [{"name": "hook", "webhooks": [{"url": url, "secret_file": str(secret_file)}]}],
        },
    }


class Service:
    """The alerting half of `watchtower run`, wired as bootstrap wires it, on a clock the test moves."""

    def __init__(self, path: Path, store) -> None:
        self.clock = Clock()
        self.settings, _ = read_settings(path, env={})
        self.http = httpx.AsyncClient()
        self.c = build_container(
            self.settings,
            clock=self.clock,
            source_health=lambda: HEALTHY,
            source_name="test",
            alert_store=store,
        )
        self.worker = DeliveryWorker(
            store=store,
            senders=build_senders(self.settings.alerting, http=self.http),
            clock=self.clock,
            cfg=self.settings.alerting,
            rnd=lambda: 0.5,
        )
        self.reloader = config_reloader(
            self.c, path, worker=self.worker, senders=lambda cfg: build_senders(cfg, http=self.http)
        )

    async def poll(self):
        return await asyncio.to_thread(self.reloader.poll)  # as the reload task does: off the loop

    async def tick(self, objs, at: float) -> None:
        self.clock.t = at
        snap, _ = snapshot(objs, at, self.settings)
        assert self.c.alerting is not None
        await self.c.alerting.on_tick(Tick(at=at, snapshot=snap, health=HEALTHY))
        await self.worker.drain()

    def metric(self, name: str) -> str:
        return next(
            line for line in self.c.metrics.render().decode().splitlines() if line.startswith(name + " ")
        )


def alertnames(rcv: Receiver) -> list[str]:
    return [
        a["labels"]["alertname"] + "/" + a["labels"].get("workload", "")
        for r in rcv.requests
        for a in r["body"]["alerts"]
    ]


@pytest.fixture
def receivers():
    a, b = Receiver(SECRET), Receiver(SECRET)
    yield a, b
    a.stop()
    b.stop()


async def test_a_valid_new_configmap_is_applied_and_a_bad_one_keeps_the_running_one_and_alerts(
    tmp_path, receivers, store_backend
):
    a, b = receivers
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    mount = ConfigMapMount(tmp_path / "config")
    mount.root.mkdir()
    mount.publish(doc(secret, a.url))
    svc = Service(mount.path, store_backend.open())
    try:
        assert await svc.poll() is None  # nothing changed since the start
        job1 = [pending("job-1", "critical", T0 - 6 * 60)]
        await svc.tick(job1, T0)
        await svc.tick(job1, T0 + 30)
        assert alertnames(a) == ["WorkloadWaitWarning/job-1"] and b.requests == []

        # The receiver moves: what is sent from now on goes to the new URL.
        mount.publish(doc(secret, b.url))
        done = await svc.poll()
        assert done.result == "applied" and "alerting.receivers[0].webhooks[0].url" in done.changes.live
        assert svc.metric("watchtower_config_valid") == "watchtower_config_valid 1.0"
        job2 = [*job1, pending("job-2", "high", T0 - 20 * 60)]
        await svc.tick(job2, T0 + 60)
        await svc.tick(job2, T0 + 90)
        assert alertnames(b) == ["WorkloadWaitWarning/job-2"]
        assert len(a.requests) == 1

        # A route naming a receiver that does not exist: refused, the running routing stays.
        mount.publish(doc(secret, a.url, route_receiver="x"))
        done = await svc.poll()
        assert done.result == "invalid"
        assert done.problems == ("alerting.route.routes[1].receiver: 'x' is not one of the receivers (hook)",)
        assert svc.metric("watchtower_config_valid") == "watchtower_config_valid 0.0"
        assert 'watchtower_config_reload_total{result="invalid"} 1.0' in svc.c.metrics.render().decode()
        assert await svc.poll() is None  # looked at once, not again at every poll
        job3 = [*job2, pending("job-3", "medium", T0 - 40 * 60)]
        await svc.tick(job3, T0 + 120)
        await svc.tick(job3, T0 + 150)
        assert len(a.requests) == 1  # still B's (the URL in the bad file is not taken either)
        got = [r["body"]["alerts"] for r in b.requests[1:]]
        flat = {al["labels"]["alertname"]: al for alerts in got for al in alerts}
        assert set(flat) == {"WorkloadWaitWarning", "WatchtowerConfigInvalid"}
        assert flat["WorkloadWaitWarning"]["labels"]["workload"] == "job-3"
        invalid = flat["WatchtowerConfigInvalid"]
        assert invalid["status"] == "firing"
        assert (
            "- alerting.route.routes[1].receiver: 'x' is not one of the receivers (hook)"
            in (invalid["annotations"]["description"])
        )

        # Fixed: applied, and the alert resolves.
        mount.publish(doc(secret, b.url))
        assert (await svc.poll()).result == "applied"
        assert svc.metric("watchtower_config_valid") == "watchtower_config_valid 1.0"
        await svc.tick(job3, T0 + 180)
        state = {a.alertname: a.state.value for a in svc.c.alerting.evaluator.alerts.values()}
        assert state["WatchtowerConfigInvalid"] == "resolved"
        await svc.tick(job3, T0 + 150 + 300)  # its group's interval: the resolve is sent
        last = [
            al
            for al in b.requests[-1]["body"]["alerts"]
            if al["labels"]["alertname"] == "WatchtowerConfigInvalid"
        ]
        assert [al["status"] for al in last] == ["resolved"]
    finally:
        await svc.http.aclose()


async def test_a_disabled_rule_stops_alerting_at_once_and_a_changed_tier_threshold_waits_for_a_restart(
    tmp_path, receivers, store_backend, caplog
):
    a, _ = receivers
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    mount = ConfigMapMount(tmp_path / "config")
    mount.root.mkdir()
    mount.publish(doc(secret, a.url))
    svc = Service(mount.path, store_backend.open())
    try:
        waiting = [pending("quick", "critical", T0 - 2 * 60)]
        lower = doc(secret, a.url, critical_warn="1m")
        lower["server"] = {"port": 9999}
        mount.publish(lower)
        done = await svc.poll()
        assert done.result == "applied" and done.changes.live == ()
        assert done.changes.restart == ("server.port", "tiers[0].warn_after")
        assert "take effect at the next restart: server.port, tiers[0].warn_after" in caplog.text
        await svc.tick(waiting, T0)
        await svc.tick(waiting, T0 + 30)
        assert a.requests == []  # waited 2m: the running threshold (5m) is not reached

        off = {**lower, "alerting": {**lower["alerting"], "rules": {"disabled": ["WorkloadWaitWarning"]}}}
        mount.publish(off)
        assert (await svc.poll()).changes.live == ("alerting.rules.disabled[0]", "alerting.rules.disabled[]")
        await svc.tick(waiting, T0 + 5 * 60)
        await svc.tick(waiting, T0 + 5 * 60 + 30)
        assert a.requests == []  # waited past 5m, but the rule is off from the reload on

        mount.publish(lower)  # on again: the warning goes out
        await svc.poll()
        await svc.tick(waiting, T0 + 6 * 60)
        await svc.tick(waiting, T0 + 6 * 60 + 30)
        assert alertnames(a) == ["WorkloadWaitWarning/quick"]
    finally:
        await svc.http.aclose()
