"""The report's inputs from the live cluster: entitlement from the Tick's quota lines, each team's
namespaces, and the workloads running longer than the threshold at the week's end."""

from __future__ import annotations

from typing import Any

from tests.fixtures.scenario import NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.domain.fairness.compute import ReportInputs, RunningLine, compute_report
from watchtower.domain.fairness.inputs import entitlements, running_lines, team_namespaces
from watchtower.domain.fairness.report import Method


def test_quota_namespaces_and_running_work_from_the_demo_cluster() -> None:
    cluster = demo_cluster()
    c = build_container(
        Settings(), clock=ManualClock(), source_health=ReplaySource(cluster).feed_health, source_name="t"
    )
    list_everything(c.queue_tracker, cluster)
    tick = c.queue_tracker.evaluate(NOW)
    ent = entitlements(tick, {"ops": 2.0})
    assert ent["vision"].quota_gpus == 16 and ent["vision"].weight is None
    assert ent["ops"].weight == 2.0 and ent["ops"].quota_gpus is None
    assert team_namespaces(c.queue_tracker.state) == {
        "vision": ("vision",),
        "language": ("nlp",),
        "ops": ("ops",),
    }
    lines = {
        (r.namespace, r.workload): r
        for r in running_lines(c.queue_tracker.state, c.queue_tracker.policy.tiers)
    }
    resnet = lines[("vision", "PaddleJob/resnet")]
    assert (resnet.gpus, resnet.started, resnet.tier, resnet.team) == (24, NOW - 7100, "low", "vision")
    assert ("vision", "Pod/old-batch-0") in lines  # terminating: still holds its GPUs


def test_only_work_running_past_the_threshold_at_the_week_end_is_listed() -> None:
    end = NOW
    inp = _week_ending(
        end,
        usage=None,
        entitlement={},
        namespaces={"t": ("ns",)},
        method=Method(10, {"low": 28800}, 72 * 3600, 300, "weights"),
        running=[
            RunningLine("t", "ns", "Job/long", "low", 8, end - 80 * 3600),
            RunningLine("t", "ns", "Job/short", "low", 8, end - 70 * 3600),
            RunningLine("t", "ns", "Job/later", "low", 8, end + 3600),  # began after the week
        ],
    )
    (t,) = compute_report(inp).teams
    assert [(w.workload, w.seconds) for w in t.long_running] == [("Job/long", 80 * 3600)]


def test_auto_entitlement_goes_team_by_team_as_the_live_gauges_do() -> None:
    # The demo's cluster: Kueue's ClusterQueue names production only, the research teams have quota. Taking
    # Kueue for every team once gave the research teams E = 0.
    from watchtower.domain.fairness.compute import TeamEntitlement
    from watchtower.domain.fairness.live import Pool, entitled_gpus
    from watchtower.domain.fairness.usage import ClusterUsage, TeamUsage, UsageFigures

    end = NOW
    start = end - 168 * 3600
    # 10 GPUs measured for 84 of the week's hours (a gap): capacity 840 GPU-hours.
    cluster = ClusterUsage(840.0, 600.0, 0.0, 0.0, 0.0, None, None, 10.0)
    usage = UsageFigures(
        start=start,
        end=end,
        step=300,
        teams={t: TeamUsage(200.0, 0.0, None, None, None) for t in ("prod", "vision", "nlp")},
        cluster=cluster,
    )
    ent = {
        "prod": TeamEntitlement(kueue_nominal_gpus=2.0, quota_gpus=8.0),  # Kueue first
        "vision": TeamEntitlement(quota_gpus=6.0),
        "nlp": TeamEntitlement(quota_gpus=2.0),
        "guests": TeamEntitlement(weight=3.0),  # named by nothing the cluster has
    }
    inp = _week_ending(
        end,
        usage=usage,
        entitlement=ent,
        namespaces={},
        method=Method(10, {"low": 28800}, 72 * 3600, 300, "auto"),
        weights={"guests": 3.0},
    )
    got = {t.team: (t.entitlement, t.entitlement_source) for t in compute_report(inp).teams}
    # prod: 2 nominal GPUs × 84 h = 168. Quota shares of capacity over the quotas (prod's 8 included, as
    # the live gauge has it): vision 840 × 6/16 = 315, nlp 840 × 2/16 = 105. guests: none names it, 0.
    assert got == {
        "prod": (168.0, "kueue"),
        "vision": (315.0, "quota"),
        "nlp": (105.0, "quota"),
        "guests": (0.0, "none"),
    }
    live = entitled_gpus(
        10.0,
        ["prod", "vision", "nlp", "guests"],
        mode="auto",
        quotas={"prod": 8.0, "vision": 6.0, "nlp": 2.0},
        weights={"guests": 3.0},
        kueue=[Pool(2.0, ("prod",))],
    )
    assert {t: (g * 84, s) for t, (g, s) in live.items()} == got


def _week_ending(end: float, **kw: Any) -> ReportInputs:
    """The inputs of a week ending at `end` with no history but what `kw` gives."""
    base: dict[str, Any] = dict(
        week="2027-W03",
        timezone="UTC",
        start=end - 168 * 3600,
        end=end,
        generated_at=end + 10,
        earlier=[],
        episodes=[],
        preemptions=[],
        incidents=[],
        history_hours=168,
    )
    return ReportInputs(**(base | kw))
