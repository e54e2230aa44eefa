"""One Alertmanager receiving two clusters' pushes, configured by the fleet-mode generated configuration
(`watchtower generate --fleet`): the same alert from clusters a and b lands in two groups, one per cluster,
and the receiver gets one notification per cluster, each naming only its own. Two Watchtowers' alerting
(evaluation, outbox, delivery; the simulator's objects), a real Alertmanager (Debian's 0.25 and 0.35), the
tests' real HTTP receiver. The same run with the single-cluster configuration shows what the fleet form
prevents: both clusters' alerts in one group and one notification."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
import yaml

from alerts.alertmanager import alertmanager_config
from tests.alerting.alertmanager import Alertmanager, binaries
from tests.alerting.helpers import pending
from tests.alerting.servers import Receiver
from tests.alerting.test_cluster_identity import named
from tests.alerting.test_push_to_real_alertmanager import FLAVOURS, Rig, push_settings
from watchtower.commands.generate import fleet_mode

CLUSTERS = ("a", "b")


@pytest.fixture
def receiver():
    r = Receiver("whsec_" + "A" * 24)
    yield r
    r.stop()


def firing(receiver: Receiver) -> list[dict]:
    return [r["body"] for r in receiver.requests if r["body"]["status"] == "firing"]


def groups(am: Alertmanager) -> list[dict]:
    """Alertmanager's groups of the test's receiver, from its API."""
    return [g for g in httpx.get(am.url + "/api/v2/alerts/groups").json() if g["receiver"]["name"] == "hook"]


async def _run(flavour: str, tmp_path: Path, receiver: Receiver, *, fleet: bool, done, settle: float):
    """Start Alertmanager with the generated configuration, then clusters a and b each pushing the same
    pending workload until `done(am)` holds, then `settle` seconds more; return the Alertmanager's groups."""
    exe, _ = binaries(flavour)
    am = Alertmanager(exe, tmp_path / "am.yml", tmp_path / "am")
    s = push_settings([am.url], receiver.url)
    (tmp_path / "am.yml").write_text(yaml.safe_dump(alertmanager_config(fleet_mode(s) if fleet else s)))
    am.start()
    rigs = []
    for c in CLUSTERS:
        (tmp_path / c).mkdir()
        rigs.append(Rig(named(s, c), tmp_path / c))
    try:
        objs = [pending("job-a", "critical", time.time() - 6 * 60)]

        async def tick() -> None:
            for rig in rigs:
                await rig.tick(objs)
            await asyncio.sleep(0.2)

        deadline = time.monotonic() + 20
        while not done(am):
            if time.monotonic() > deadline:
                pytest.fail(f"not within 20s; groups: {groups(am)}; notified: {firing(receiver)}")
            await tick()
        end = time.monotonic() + settle  # past a group_interval: a further notification would be sent by now
        while time.monotonic() < end:
            await tick()
        return groups(am)
    finally:
        for rig in rigs:
            await rig.close()
        am.stop()


@pytest.fixture(params=FLAVOURS)
def flavour(request) -> str:
    return request.param


async def test_the_fleet_configuration_groups_each_clusters_alerts_apart(flavour, tmp_path, receiver):
    got = await _run(
        flavour, tmp_path, receiver, fleet=True, done=lambda am: len(firing(receiver)) >= 2, settle=3
    )
    # The same alertname, namespace and workload from both clusters: one group per cluster.
    assert sorted(g["labels"]["cluster"] for g in got) == ["a", "b"]
    for g in got:
        assert g["labels"] == {
            "cluster": g["labels"]["cluster"],
            "alertname": "WorkloadWaitWarning",
            "namespace": "team-a",
        }
        (alert,) = g["alerts"]
        assert alert["labels"]["cluster"] == g["labels"]["cluster"]
        assert alert["labels"]["workload"] == "job-a"
    # Two notifications, each naming one cluster and holding only its alert.
    bodies = firing(receiver)
    assert len(bodies) == 2, [b["groupKey"] for b in bodies]
    assert sorted(b["groupLabels"]["cluster"] for b in bodies) == ["a", "b"]
    for b in bodies:
        assert b["commonLabels"]["cluster"] == b["groupLabels"]["cluster"]
        assert [a["labels"]["cluster"] for a in b["alerts"]] == [b["groupLabels"]["cluster"]]


async def test_without_fleet_mode_both_clusters_share_one_group(tmp_path, receiver):
    def both_in_one_group(am: Alertmanager) -> bool:
        got = groups(am)
        return len(got) == 1 and len(got[0]["alerts"]) == 2

    got = await _run("current", tmp_path, receiver, fleet=False, done=both_in_one_group, settle=0)
    assert "cluster" not in got[0]["labels"]
    assert sorted(a["labels"]["cluster"] for a in got[0]["alerts"]) == ["a", "b"]
