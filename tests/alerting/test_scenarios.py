"""Rule scenarios from real-shaped objects through the real decoder, cluster state and queue, into the
alerting (evaluation, notification), the SQLite outbox and a real webhook receiver on 127.0.0.1; the clock is injected.
Plus `watchtower analyze --format json` run as a subprocess on a dump."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.alerting.helpers import (
    SECRET,
    T0,
    Clock,
    apply,
    paddle_owner,
    pending,
    pending_pod,
    running_pod,
    settings,
    state_of,
)
from tests.alerting.servers import Receiver
from tests.alerting.test_notifications import Rig, alerts_in, hook_settings
from watchtower.domain.alerts.holders import gpu_holders
from watchtower.domain.estimate import ScheduleHistory
from watchtower.domain.health import SourceHealth
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.state import ClusterState
from watchtower.domain.stuck import stuck_heads
from watchtower.domain.tick import Tick
from watchtower.simulator import objects as o

ROOT = Path(__file__).resolve().parents[2]
NS = "vision"
NEVER = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: not eligible due to "
    "preemptionPolicy=Never."
)
FULL = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
    "1 No preemption victims found for incoming pod."
)


@pytest.fixture
def receiver():
    r = Receiver(SECRET)
    yield r
    r.stop()


class StateRig(Rig):
    """A Rig whose ticks evaluate a ClusterState, as the watch loop does, and that hands it to the rules."""

    def __init__(self, s, tmp_path, clock, state: ClusterState, **kw):
        self.state = state
        super().__init__(s, tmp_path, clock, **kw)

    async def tick_state(self, at, history: ScheduleHistory | None = None):
        """Tick as the queue tracker does; with a `history`, the Tick also carries stuck heads and start estimates."""
        self.clock.t = at
        policy = self.s.queue_policy()
        snap = QueueEvaluator(policy).evaluate(self.state, now=at, include_running=True)
        holders = gpu_holders(self.state, self.s.tier_policy())
        extra = {}
        if history is not None:
            extra = {
                "waits": history.waits(at),
                "stuck": stuck_heads(
                    snap, self.state, stuck_after=self.s.queue.stuck_after, selector=policy.selector,
                    last_bound=history.last_bound,
                ),
            }  # fmt: skip
        await self.svc.on_tick(Tick(at=at, snapshot=snap, holders=holders, health=self.health(), **extra))
        return await self.worker.drain()


def firing(rig, at, alertname):
    return [
        a
        for a, _ in rig.svc.admin.listed_alerts(at)
        if a.alertname == alertname and a.state.value == "firing"
    ]


async def test_priority_inversion_names_the_lower_tier_workload_holding_the_gpus(tmp_path, receiver):
    t = T0
    state = state_of(
        o.node("gpu-0", gpus=8),
        # Low-tier training holds all 8 GPUs of the only node; urgent work cannot preempt it (Never).
        running_pod(
            "train-worker-0", "gpu-0", ns=NS, created=t - 7200, gpus=8, priority=100_000,
            priority_class="batch", owner=paddle_owner("train"),
        ),
        pending_pod(
            "serve", ns=NS, created=t - 20 * 60, gpus=8, priority=900_000, priority_class="online-serving",
            preemption_policy="Never", message=NEVER,
        ),
    )  # fmt: skip
    rig = StateRig(hook_settings(receiver.url, group_wait="0s"), tmp_path, Clock(), state)
    await rig.tick_state(t)
    (inv,) = firing(rig, t, "WorkloadPriorityInversion")
    assert inv.labels["workload"] == "serve" and inv.labels["tier"] == "high"
    assert inv.annotations["blocker"] == "vision/PaddleJob/train"
    assert inv.annotations["blocker_tier"] == "low"
    assert "vision/PaddleJob/train (8 GPU, tier low)" in inv.annotations["description"]
    sent = [a for r in receiver.requests for a in r["body"]["alerts"]]
    assert any(a["labels"]["alertname"] == "WorkloadPriorityInversion" for a in sent)
    # The same wait with preemption possible is no inversion: the scheduler will make room.
    apply(
        state,
        pending_pod(
            "serve", ns=NS, created=t - 20 * 60, gpus=8, priority=900_000, priority_class="online-serving",
            message=FULL.replace(
                "0/1 nodes are available: 1 No preemption victims found for incoming pod.",
                "not eligible due to a terminating pod on the nominated node.",
            ),
        ),
    )  # fmt: skip
    await rig.tick_state(t + 60)
    assert firing(rig, t + 60, "WorkloadPriorityInversion") == []
    await rig.close()


def gang(t, *, placed: int, waiting: int, since: float):
    owner = paddle_owner("llm")
    objs = [
        running_pod(f"llm-worker-{i}", "gpu-0", ns=NS, created=since, gpus=2, owner=owner, priority=500_000,
                    priority_class="experiment")
        for i in range(placed)
    ]  # fmt: skip
    objs += [
        pending_pod(f"llm-worker-{placed + i}", ns=NS, created=since, gpus=2, owner=owner, priority=500_000,
                    priority_class="experiment", message=FULL)
        for i in range(waiting)
    ]  # fmt: skip
    return state_of(o.node("gpu-0", gpus=8), *objs)


async def test_a_partial_gang_holding_gpus_past_the_limit_is_a_gang_stall(tmp_path, receiver):
    s = hook_settings(receiver.url, group_wait="0s")
    young = StateRig(s, tmp_path, Clock(), gang(T0, placed=3, waiting=2, since=T0 - 9 * 60))
    await young.tick_state(T0)
    assert firing(young, T0, "WorkloadGangStalled") == []  # 9 min: under the 10 min limit
    await young.close()

    (tmp_path / "old").mkdir()
    rig = StateRig(s, tmp_path / "old", Clock(), gang(T0, placed=3, waiting=2, since=T0 - 11 * 60))
    await rig.tick_state(T0)
    (stall,) = firing(rig, T0, "WorkloadGangStalled")
    assert stall.labels["workload"] == "llm" and stall.labels["kind"] == "PaddleJob"
    assert stall.annotations["gpus_held"] == "6"
    assert "holds 6 GPU(s) idle while 2 pod(s) wait" in stall.annotations["summary"]
    assert ("WorkloadGangStalled", "llm", "firing") in [a for r in receiver.requests for a in alerts_in(r)]
    await rig.close()


def preempted(state, i, at):
    v = running_pod(
        f"train-worker-{i}", "gpu-0", ns=NS, uid=f"v{i}", created=at - 600, gpus=8, priority=100_000,
        priority_class="batch", owner=paddle_owner("train"), deletion=at,
    )  # fmt: skip
    v["status"]["conditions"].append(
        o.condition("DisruptionTarget", "True", at, reason="PreemptionByScheduler")
    )
    apply(state, v, deleted=True)


async def test_preempted_three_times_within_the_hour_is_thrash_twice_is_not(tmp_path, receiver):
    t = T0
    state = state_of(o.node("gpu-0", gpus=8))
    apply(
        state,
        pending_pod(
            "train-worker-0", ns=NS, uid="again", created=t - 100, gpus=8, priority=100_000,
            priority_class="batch", owner=paddle_owner("train"), message=FULL,
        ),
    )  # fmt: skip
    rig = StateRig(hook_settings(receiver.url, group_wait="0s"), tmp_path, Clock(), state)
    preempted(state, 1, t - 3000)
    preempted(state, 2, t - 1500)
    await rig.tick_state(t)
    assert firing(rig, t, "WorkloadPreemptionThrash") == []
    preempted(state, 3, t + 10)
    await rig.tick_state(t + 20)
    (thrash,) = firing(rig, t + 20, "WorkloadPreemptionThrash")
    assert thrash.labels["workload"] == "train" and thrash.annotations["preemptions"] == "3"
    assert "preempted 3 times in 1h" in thrash.annotations["summary"]
    # An hour after the first, only two remain in the window: it resolves.
    await rig.tick_state(t - 3000 + 3601 + 300)
    assert firing(rig, t + 901, "WorkloadPreemptionThrash") == []
    await rig.close()


async def test_kubernetes_unreachable_fires_after_two_minutes_unhealthy_and_resolves(tmp_path, receiver):
    health = {"healthy": True}
    s = hook_settings(receiver.url, group_wait="0s", group_interval="1s")
    clock = Clock()
    rig = Rig(s, tmp_path, clock, health=lambda: SourceHealth(healthy=health["healthy"]))
    await rig.tick([], T0)
    health = {"healthy": False}
    await rig.tick([], T0 + 30)  # unhealthy from here
    await rig.tick([], T0 + 140)
    assert firing(rig, T0 + 140, "WatchtowerKubernetesUnreachable") == []  # 110 s: not yet
    await rig.tick([], T0 + 151)
    (down,) = firing(rig, T0 + 151, "WatchtowerKubernetesUnreachable")
    assert down.labels["severity"] == "critical" and "2m" in down.annotations["summary"]
    assert [alerts_in_any(r) for r in receiver.requests] == [[("WatchtowerKubernetesUnreachable", "firing")]]
    health = {"healthy": True}
    await rig.tick([], T0 + 200)
    assert receiver.requests[-1]["body"]["status"] == "resolved"
    assert alerts_in_any(receiver.requests[-1]) == [("WatchtowerKubernetesUnreachable", "resolved")]
    await rig.close()


def alerts_in_any(req):
    return [(a["labels"]["alertname"], a["status"]) for a in req["body"]["alerts"]]


async def test_the_slack_compatible_body_is_signed_and_says_what_fires(tmp_path, receiver):
    s = settings(
        {
            "route": {"receiver": "chat", "group_by": ["alertname", "namespace"], "group_wait": "0s"},
            "receivers": [
                {
                    "name": "chat",
                    "webhooks": [{"url": receiver.url, "secret": SECRET, "slack_compatible": True}],
                }
            ],
        }
    )
    rig = Rig(s, tmp_path, Clock())
    await rig.tick([pending("job-a", "critical", T0 - 6 * 60), pending("job-b", "critical", T0 - 7 * 60)], T0)
    (req,) = receiver.requests
    assert req["verified"]
    body = req["body"]
    assert set(body) == {"text", "attachments"}
    assert body["text"] == "[FIRING:2] WorkloadWaitWarning team-a"
    (att,) = body["attachments"]
    assert att["color"] == "danger" and att["fallback"] == body["text"]
    lines = att["text"].splitlines()
    assert len(lines) == 2 and all(line.startswith("🔥 ") for line in lines)
    assert any("team-a/job-a" in line for line in lines) and any("team-a/job-b" in line for line in lines)
    await rig.close()


async def test_for_keeps_an_alert_pending_and_keep_firing_for_delays_its_resolution(tmp_path, receiver):
    s = settings(
        {
            "rules": {"pending_for": "2m", "keep_firing_for": "5m"},
            "route": {
                "receiver": "hook",
                "group_by": ["alertname", "workload"],
                "group_wait": "0s",
                "group_interval": "1s",
            },
            "receivers": [{"name": "hook", "webhooks": [{"url": receiver.url, "secret": SECRET}]}],
        }
    )
    rig = Rig(s, tmp_path, Clock())
    job = [pending("job", "critical", T0 - 6 * 60)]
    await rig.tick(job, T0)
    assert [a.state.value for a, _ in rig.svc.admin.listed_alerts(T0)] == ["pending"]
    await rig.tick(job, T0 + 119)
    assert receiver.requests == []  # pending for 119 s of its 120
    await rig.tick(job, T0 + 120)
    assert [alerts_in(r) for r in receiver.requests] == [[("WorkloadWaitWarning", "job", "firing")]]
    # Scheduled at T0+130; it keeps firing for 5 min after it was last seen, then resolves.
    await rig.tick([], T0 + 130)
    await rig.tick([], T0 + 120 + 299)
    assert len(receiver.requests) == 1
    assert [a.state.value for a, _ in rig.svc.admin.listed_alerts(T0 + 419)] == ["firing"]
    await rig.tick([], T0 + 120 + 300)
    assert [alerts_in(r) for r in receiver.requests][1] == [("WorkloadWaitWarning", "job", "resolved")]
    # A condition that goes away while pending never notifies.
    brief = [pending("brief", "critical", T0 + 500 - 6 * 60)]
    await rig.tick(brief, T0 + 500)
    await rig.tick([], T0 + 560)
    await rig.tick([], T0 + 900)
    assert all(a["labels"]["workload"] != "brief" for r in receiver.requests for a in r["body"]["alerts"])
    await rig.close()


def test_analyze_json_lists_the_alerts_firing_at_the_given_time(tmp_path):
    objs = [
        o.node("gpu-0", gpus=8),
        pending("crit-16m", "critical", T0 - 16 * 60),
        pending("med-31m", "medium", T0 - 31 * 60),
        pending("low-1h", "low", T0 - 3600),  # low warns after 2h: nothing
    ]
    dump = tmp_path / "dump.json"
    dump.write_bytes(orjson.dumps(o.object_list(objs)))
    at = "2025-10-09T08:53:20Z"  # T0
    out = subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "analyze", "--objects", str(dump), "--at", at,
         "--format", "json"],
        cwd=ROOT, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr.decode()
    alerts = orjson.loads(out.stdout)["alerts"]
    got = sorted((a["rule"], a["severity"], a["labels"]["workload"]) for a in alerts)
    # The empty node has the 8 GPUs each asks for: every tier's head waited past 10 minutes despite
    # capacity, as the service would say of the same cluster (issue 12 item 5).
    assert got == [
        ("WorkloadStuckDespiteCapacity", "warning", "crit-16m"),
        ("WorkloadStuckDespiteCapacity", "warning", "low-1h"),
        ("WorkloadStuckDespiteCapacity", "warning", "med-31m"),
        ("WorkloadWaitCritical", "critical", "crit-16m"),
        ("WorkloadWaitWarning", "warning", "crit-16m"),
        ("WorkloadWaitWarning", "warning", "med-31m"),
    ]
    crit = next(a for a in alerts if a["rule"] == "WorkloadWaitCritical")
    assert crit["labels"]["tier"] == "critical" and crit["labels"]["namespace"] == "team-a"
    assert crit["summary"].startswith("Pod team-a/crit-16m (critical tier, 8 GPU) has waited 16m")
    # 66 minutes later the low one has waited 2h06m: past its 2 h warn threshold.
    later = subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "analyze", "--objects", str(dump), "--at",
         "2025-10-09T10:00:00Z", "--format", "json"],
        cwd=ROOT, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    later_got = {(a["rule"], a["labels"]["workload"]) for a in orjson.loads(later.stdout)["alerts"]}
    assert ("WorkloadWaitWarning", "low-1h") in later_got  # waited 2h06m by then


async def test_a_job_refused_for_hours_with_back_off_notifies_once_firing_and_once_resolved(
    tmp_path, receiver
):
    from tests.unit.domain.alerts.rules.test_quota_blocked import T0 as STORY_T0
    from tests.unit.domain.alerts.rules.test_quota_blocked import refusal_story

    s = hook_settings(receiver.url, group_wait="0s", group_by=["alertname", "namespace", "workload"])
    state = ClusterState()
    rig = StateRig(s, tmp_path, Clock(), state)
    sent = []
    steps = list(refusal_story())
    at, i = STORY_T0, 0
    while at <= steps[-1][0] + 30 * 60:
        while i < len(steps) and steps[i][0] <= at:
            for obj in steps[i][1]:
                apply(state, obj)
            i += 1
        await rig.tick_state(at)
        sent += [
            (
                (at - STORY_T0) / 60,
                sorted((a["labels"]["severity"], a["status"]) for a in r["body"]["alerts"]),
            )
            for r in receiver.requests[len(sent) :]
        ]
        at += 60
    # Warned at 15m, escalated at 1h (the warning, muted by the critical alert, is not re-sent), resolved
    # once, in the first group flush after the quota was raised: no resolve while the refusals go on.
    assert sent == [
        (15.0, [("warning", "firing")]),
        (60.0, [("critical", "firing")]),
        (185.0, [("critical", "resolved"), ("warning", "resolved")]),
    ]
    assert all(r["verified"] for r in receiver.requests)
    await rig.close()


async def test_a_tier_head_that_fits_yet_waits_past_stuck_after_alerts_once_with_the_schedulers_words(
    tmp_path, receiver
):
    said = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    state = state_of(
        o.node("gpu-0", gpus=8),
        pending_pod("probe", ns=NS, created=T0 - 11 * 60, gpus=2, priority=500_000, priority_class="experiment",
                    message=said),
        pending_pod("probe-2", ns=NS, created=T0 - 10.5 * 60, gpus=2, priority=500_000,
                    priority_class="experiment", message=said),
    )  # fmt: skip
    history = ScheduleHistory(window=6 * 3600, min_samples=3)
    for i, m in enumerate((5, 20, 40, 60)):
        history.record("medium", at=T0 - 3600 + i, wait=m * 60)
    rig = StateRig(hook_settings(receiver.url, group_wait="0s"), tmp_path, Clock(), state)
    await rig.tick_state(T0, history)
    (stuck,) = firing(rig, T0, "WorkloadStuckDespiteCapacity")  # the head only, not the second in line
    assert stuck.labels["workload"] == "probe" and stuck.labels["tier"] == "medium"
    assert stuck.annotations["node"] == "gpu-0"
    assert stuck.annotations["scheduler_said"] == said
    assert "heads its tier and fits on node gpu-0, yet has waited 11m" in stuck.annotations["summary"]
    assert stuck.annotations["runbook_url"].endswith("#workloadstuckdespitecapacity")
    assert ("WorkloadStuckDespiteCapacity", "probe", "firing") in [
        a for r in receiver.requests for a in alerts_in(r)
    ]
    await rig.close()


async def test_a_wait_alert_carries_the_position_in_tier_and_the_start_estimate(tmp_path, receiver):
    # Medium warns after 30 min; recent medium waits 10, 40, 50, 70, 90 min: 40..90 are longer than 35,
    # median 60 → about 25 min to go.
    state = state_of(
        o.node("gpu-0", gpus=8),
        running_pod("hog", "gpu-0", ns=NS, created=T0 - 7200, gpus=8, priority=100_000, priority_class="batch"),
        pending_pod("exp", ns=NS, created=T0 - 35 * 60, gpus=8, priority=500_000, priority_class="experiment",
                    message=FULL),
    )  # fmt: skip
    history = ScheduleHistory(window=6 * 3600, min_samples=3)
    for i, m in enumerate((10, 40, 50, 70, 90)):
        history.record("medium", at=T0 - 3600 + i, wait=m * 60)
    rig = StateRig(hook_settings(receiver.url, group_wait="0s"), tmp_path, Clock(), state)
    await rig.tick_state(T0, history)
    (warn,) = firing(rig, T0, "WorkloadWaitWarning")
    assert warn.annotations["position_in_tier"] == "1"
    assert warn.annotations["start_estimate"] == (
        "estimate: starts in about 25m (from 4 medium pods scheduled in the last 6 h that waited longer "
        "than its 35m: median 1h)"
    )
    await rig.close()
