"""The weekly fairness report joined end to end: a real Prometheus holding a known ISO week and the one
before it (promtool backfill of tests/prometheus/known_week.py, laid out from Monday 00:00 UTC), a real
SQLite history holding a known history of both weeks, and the production report service
(FairnessReports, with the Prometheus reader bootstrap.py wires) building the report of the week.

Every figure is worked out by hand below, with the arithmetic beside it. Prometheus's figures of the week
(U, idle, CPU and memory hours, the quota averages, capacity and its breakdown, coverage) are known_week's
EXPECTED_*; the history's are the episodes, preemptions and incidents written here. The history comes from
the queue and Prometheus's `watchtower_waiting_gpus` of the known week has only speech's wait, so "free
while waiting" (Prometheus) and the demand D (history) are each checked against their own source.
"""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.prometheus.known_week import DAY, EXPECTED_CLUSTER, EXPECTED_TEAMS, GAP, WEEK, H, openmetrics
from tests.prometheus.prom_server import PrometheusProcess, backfill, have_prometheus
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.adapters.report.csv_export import report_csv
from watchtower.bootstrap import build_fairness_metrics as fairness_metrics
from watchtower.config import settings_from_mapping
from watchtower.domain.fairness.compute import RunningLine
from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode
from watchtower.domain.fairness.report import FairnessReport, TierWaits, WorkloadLine
from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fairness_report import ClusterNow, FairnessReports

pytestmark = pytest.mark.prometheus

THE_WEEK = IsoWeek(2023, 46)
S = int(datetime(2023, 11, 13, tzinfo=UTC).timestamp())  # Monday 00:00 UTC of 2023-W46
E = S + WEEK
P = S - WEEK  # 2023-W45, the week before: the same known week from Prometheus, its own history
NOW = E + 9 * H  # Monday 09:00, when the weekly job builds it: every open wait is counted up to E
NS = {"vision": "vision-train", "nlp": "nlp", "speech": "speech"}


def ep(
    name: str, source: str, team: str, tier: str, gpus: int, start: float, end: float | None, outcome: str
) -> WaitEpisode:
    ns = NS[team]
    return WaitEpisode(
        key=f"{ns}/{name}/{start:.0f}",
        source=source,  # type: ignore[arg-type]
        namespace=ns,
        team=team,
        tier=tier,
        workload=name,
        gpus=gpus,
        started=start,
        ended=end,
        outcome=outcome,  # type: ignore[arg-type]
    )


EPISODES = [
    # vision: one of each source, a wait that began the week before, one deleted while waiting, and a
    # 24-GPU Workload that never fits (still waiting at E: censored).
    ep("Job/v-prep", "quota", "vision", "low", 2, S - 2 * H, S + 2 * H, "scheduled"),
    ep("Pod/v-eval", "pod", "vision", "high", 8, S + H, S + H + 600, "scheduled"),
    ep("PodGroup/v-gang", "podgroup", "vision", "high", 4, S + 2 * DAY, S + 2 * DAY + 1200, "scheduled"),
    ep("Workload/v-tune", "kueue", "vision", "high", 2, S + 3 * DAY, S + 3 * DAY + 3 * H, "admitted"),
    ep("Pod/v-scratch", "pod", "vision", "low", 4, S + DAY, S + DAY + 1800, "gone"),
    ep("Workload/v-big", "kueue", "vision", "low", 24, E - 100 * H, None, "waiting"),
    # nlp: two still waiting at E.
    ep("Job/n-quota", "quota", "nlp", "medium", 4, S + 2 * DAY, S + 2 * DAY + H, "scheduled"),
    ep("Workload/n-long", "kueue", "nlp", "medium", 8, E - 10 * H, None, "waiting"),
    ep("Pod/n-small", "pod", "nlp", "low", 1, S + 5 * DAY, S + 5 * DAY + 2 * H, "scheduled"),
    ep("Pod/n-late", "pod", "nlp", "medium", 2, E - 3 * H, None, "waiting"),
    # speech: the 12-GPU wait Prometheus's known week also has, and one carried over from the week before.
    ep("Pod/s-carry", "pod", "speech", "low", 1, S - 13 * H, S + H, "scheduled"),
    ep("Job/s-train", "pod", "speech", "low", 12, S + 5 * DAY, S + 5 * DAY + 4 * H, "scheduled"),
    # The week before only.
    ep("Job/v-old", "pod", "vision", "low", 8, P + DAY, P + DAY + 10 * H, "scheduled"),
    ep("Pod/n-old", "pod", "nlp", "high", 4, P + 2 * DAY, P + 2 * DAY + H, "scheduled"),
]


def pre(
    key: str,
    at: float,
    victim: tuple[str, str, str],
    by: tuple[str, str, str] | None,
    gpus: int,
    lost: float | None,
) -> PreemptionRecord:
    vt, vtier, vw = victim
    pt, ptier, pw = by or ("", "unknown", "")
    return PreemptionRecord(key, at, NS[vt], vt, vtier, vw, NS.get(pt, ""), pt, ptier, pw, gpus, lost)


PREEMPTIONS = [
    # nlp's gang Job/n-train: two pods 30 s apart are one preemption; the same Job again an hour later is
    # another.
    pre("uid-c1a", S + 3 * DAY, ("nlp", "low", "Job/n-train"), ("vision", "high", "Pod/v-eval2"), 2, 10.0),
    pre(
        "uid-c1b", S + 3 * DAY + 30, ("nlp", "low", "Job/n-train"), ("vision", "high", "Pod/v-eval2"), 2, 10.0
    ),
    pre("uid-c2", S + 3 * DAY + H, ("nlp", "low", "Job/n-train"), ("vision", "high", "Pod/v-eval3"), 2, 2.0),
    pre("uid-d1", S + 6 * DAY, ("speech", "low", "Pod/s-batch"), ("nlp", "medium", "Pod/n-serve"), 2, 3.0),
    # Preemptor unknown, start unknown (no GPU-hours lost known).
    pre("uid-v9", S + 4 * DAY + H, ("vision", "medium", "Pod/v-exp"), None, 4, None),
    pre(
        "uid-old", S - DAY, ("vision", "low", "Job/v-old"), ("nlp", "high", "Pod/n-x"), 8, 50.0
    ),  # the week before
]


def inc(kind: str, team: str, tier: str, workload: str, start: float, end: float | None) -> Incident:
    key = f"{kind}/{NS[team]}/{workload}/{start:.0f}"
    return Incident(key, kind, NS[team], team, tier, workload, 1, start, end)  # type: ignore[arg-type]


# Starvations begin at the episode's start + its tier's critical_after (high 1 h, medium 2 h, low 8 h).
INCIDENTS = [
    inc("starvation", "vision", "high", "Workload/v-tune", S + 3 * DAY + H, S + 3 * DAY + 3 * H),
    inc("gang_stall", "vision", "high", "PodGroup/v-gang", S + 2 * DAY + 300, S + 2 * DAY + 1200),
    inc("starvation", "vision", "low", "Workload/v-big", E - 100 * H + 8 * H, None),
    inc("starvation", "nlp", "medium", "Workload/n-long", E - 10 * H + 2 * H, None),
    inc("starvation", "nlp", "medium", "Pod/n-late", E - 3 * H + 2 * H, None),
    inc("starvation", "speech", "low", "Pod/s-carry", S - 13 * H + 8 * H, S + H),  # begun the week before
    inc("starvation", "vision", "low", "Job/v-old", P + DAY + 8 * H, P + DAY + 10 * H),  # the week before
]

# The service recorded every minute of the week but the six hours of the known week's gap, when it (like
# every source) was down: 162 of 168 hours.
HEARTBEATS = [m for m in range(S, E, 60) if not GAP[0] <= m - S < GAP[1]]

# What the live cluster says now: a team with a namespace and no work at all (no demand), and two
# workloads running at E: vision's b-0 since day 3 (96 h: listed) and one at exactly 72 h (not longer than
# 72 h: not listed).
NAMESPACES = {"vision": ("vision-train",), "nlp": ("nlp",), "speech": ("speech",), "audio": ("audio",)}
RUNNING = [
    RunningLine("vision", "vision-train", "Pod/b-0", "low", 4, S + 3 * DAY),
    RunningLine("speech", "speech", "Pod/s-serve", "high", 1, E - 72 * H),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FairnessReport]:
    if not have_prometheus():
        pytest.fail("prometheus/promtool not on PATH: run tests/setup/system-deps.sh")
    tmp = tmp_path_factory.mktemp("report-joined")
    data = tmp / "data"
    for start in (P, S):  # one block each: the same known week twice, back to back
        backfill(openmetrics(start), data)
    prom = PrometheusProcess(config="global:\n  scrape_interval: 1m\n", data_dir=data)
    prom.start()
    history = SQLiteFairnessHistory(tmp / "watchtower.db")
    history.record(EPISODES, PREEMPTIONS, INCIDENTS, heartbeats=HEARTBEATS)
    settings = settings_from_mapping({"prometheus": {"url": prom.url}}, env={})
    metrics = fairness_metrics(settings)
    cluster = ClusterNow(tick=lambda: None, namespaces=lambda: NAMESPACES, running=lambda: RUNNING)
    reports = FairnessReports(settings=settings, history=history, metrics=metrics, cluster=cluster)
    try:
        yield asyncio.run(reports.build(THE_WEEK, now=NOW))
    finally:
        history.close()
        prom.stop()


def exact(v: Any) -> Any:
    """Floats to float rounding (the integrals are exact: known_week's module doc says why); the rest as is."""
    return pytest.approx(v, rel=1e-9, abs=1e-12) if isinstance(v, float) else v


# --- by hand --------------------------------------------------------------------------------------------
C = EXPECTED_CLUSTER["capacity_gpu_hours"]  # 24 GPUs × 162 h present = 3888 GPU-h
# vision 936, nlp 456, speech 72 GPU-hours (known_week.py counts them)
U: dict[str, float] = {t: float(f["gpu_hours"]) for t, f in EXPECTED_TEAMS.items()}  # type: ignore[index]
U["audio"] = 0.0  # Prometheus answered and has no series of the team: 0, not missing
# Entitlement: no Kueue or Volcano queue and no live quota (tick None), so `auto` takes, team by team, the quota, from
# Prometheus's week averages: vision 16, nlp (16 × 864 + 8 × 1080) / 1944 = 104/9 steps-weighted, speech and
# audio none (0, source none). E = C × g / Σg with Σg = 16 + 104/9 = 248/9.
G = {"vision": 16.0, "nlp": 104 / 9, "speech": 0.0, "audio": 0.0}
# vision 3888 × 144/248 = 2257.55, nlp 3888 × 104/248 = 1630.45, speech and audio 0
E_ = {t: C * g / (248 / 9) for t, g in G.items()}
# D = U + Σ GPUs × hours waited within [S, E):
#   vision: v-prep 2 × 2 h (from S) + v-eval 8 × 600 s + v-gang 4 × 1200 s + v-tune 2 × 3 h + v-scratch
#           (gone, still demand) 4 × 0.5 h + v-big 24 × 100 h = 4 + 4/3 + 4/3 + 6 + 2 + 2400
#   nlp:    n-quota 4 × 1 h + n-long 8 × 10 h + n-small 1 × 2 h + n-late 2 × 3 h = 92
#   speech: s-carry 1 × 1 h (from S) + s-train 12 × 4 h = 49
WAITED = {"vision": 4 + 4 / 3 + 4 / 3 + 6 + 2 + 2400, "nlp": 92.0, "speech": 49.0, "audio": 0.0}
D = {t: U[t] + WAITED[t] for t in U}  # vision 3350.67, nlp 548, speech 121, audio 0
# F: speech has demand and E = 0, so the shares are equal, not weighted by E. ΣD = 4019.67 > C = 3888, so
# max-min binds: level 3888 / 3 = 1296 fills nlp (548) and speech (121); vision gets the rest,
# 3888 − 548 − 121 = 3219 < its 3350.67. audio has no demand: 0.
F = {"vision": C - 548.0 - 121.0, "nlp": 548.0, "speech": 121.0, "audio": 0.0}
# x = min(1, U / min(D, F)): vision 936 / 3219, nlp 456 / 548, speech 72 / 121; audio none.
X = {"vision": 936 / 3219, "nlp": 456 / 548, "speech": 72 / 121, "audio": None}


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


# The week before: the same Prometheus figures (U, C); its waits: vision v-prep 2 × 2 h (up to S) + v-old
# 8 × 10 h = 84, nlp n-old 4 × 1 h = 4, speech s-carry 1 × 13 h = 13. ΣD = 1020 + 460 + 85 < C: F = D,
# x = U / D.
JAIN_THIS = jain([936 / 3219, 456 / 548, 72 / 121])  # audio, with no demand, left out: n = 3
JAIN_LAST = jain([936 / 1020, 456 / 460, 72 / 85])
CPU_C, MEM_C = EXPECTED_CLUSTER["cpu_core_hours"], EXPECTED_CLUSTER["memory_gib_hours"]  # 31104, 248832


def team_figures(r: FairnessReport, team: str) -> dict[str, Any]:
    t = r.team(team)
    assert t is not None
    return {
        "namespaces": t.namespaces,
        "used": t.used,
        "entitlement": t.entitlement,
        "entitlement_source": t.entitlement_source,
        "attainment": t.attainment,
        "borrowed": t.borrowed,
        "lent": t.lent,
        "demand": t.demand,
        "fair_share": t.fair_share,
        "satisfaction": t.satisfaction,
        "share_gpu": t.shares["gpu"],
        "share_cpu": t.shares["cpu"],
        "share_memory": t.shares["memory"],
        "dominant_resource": t.dominant_resource,
        "preemptions_suffered": dict(t.preemptions_suffered),
        "preemptions_caused": dict(t.preemptions_caused),
        "gpu_hours_lost": t.gpu_hours_lost,
        "idle_allocated": t.idle_allocated,
        "idle_share": t.idle_share,
        "starvation_incidents": t.starvation_incidents,
        "gang_stalls": t.gang_stalls,
    }


EXPECTED = {
    "vision": {
        "namespaces": ("vision-train",),
        "used": 936.0,
        "entitlement": E_["vision"],
        "entitlement_source": "quota",
        "attainment": 936 / E_["vision"],  # 0.4146
        "borrowed": 0.0,  # 936 < 2257.55
        "lent": 0.0,  # E 2257.55 < D 3350.67: nothing left to others
        "demand": D["vision"],
        "fair_share": F["vision"],
        "satisfaction": X["vision"],
        "share_gpu": 936 / C,  # 0.241
        "share_cpu": (32 * 72 + 16 * 90) / CPU_C,  # a-0 32 cores × 72 h + b-0 16 × 90 h: 0.120
        "share_memory": (256 * 72 + 64 * 90) / MEM_C,  # 0.097
        "dominant_resource": "gpu",
        "preemptions_suffered": {"medium": 1},  # Pod/v-exp, by an unknown preemptor
        "preemptions_caused": {"high": 2},  # n-train twice (its two pods 30 s apart are one)
        "gpu_hours_lost": 0.0,  # v-exp's start was unknown: nothing known lost; the week before's not counted
        "idle_allocated": 360.0,  # b-0 4 GPUs × 90 h at 3 %
        "idle_share": 360 / 936,
        "starvation_incidents": 2,  # v-tune (3 h > 1 h), v-big (100 h > 8 h); v-old's was the week before
        "gang_stalls": 1,
    },
    "nlp": {
        "namespaces": ("nlp",),
        "used": 456.0,
        "entitlement": E_["nlp"],
        "entitlement_source": "quota",
        "attainment": 456 / E_["nlp"],  # 0.2797
        "borrowed": 0.0,
        "lent": E_["nlp"] - 548,  # 1630.45 − 548 = 1082.45 nobody in nlp asked for
        "demand": 548.0,
        "fair_share": 548.0,
        "satisfaction": 456 / 548,
        "share_gpu": 456 / C,
        "share_cpu": 16 * 114 / CPU_C,
        "share_memory": 128 * 114 / MEM_C,
        "dominant_resource": "gpu",
        "preemptions_suffered": {"low": 2},  # Job/n-train at 3 d (two pods, one preemption) and at 3 d + 1 h
        "preemptions_caused": {"medium": 1},  # speech's s-batch
        "gpu_hours_lost": 10.0 + 10.0 + 2.0,  # Σ over the victim pods, not the preemptions
        "idle_allocated": 360.0,  # c-0 4 GPUs × 90 h at 5 %
        "idle_share": 360 / 456,
        "starvation_incidents": 2,  # n-long (10 h > 2 h), n-late (3 h > 2 h)
        "gang_stalls": 0,
    },
    "speech": {
        "namespaces": ("speech",),
        "used": 72.0,
        "entitlement": 0.0,  # no quota, Kueue or Volcano queue names it: 0, from none
        "entitlement_source": "none",
        "attainment": None,  # U / 0: missing, not infinite
        "borrowed": 72.0,  # max(0, 72 − 0)
        "lent": 0.0,
        "demand": 121.0,
        "fair_share": 121.0,
        "satisfaction": 72 / 121,
        "share_gpu": 72 / C,
        "share_cpu": 8 * 36 / CPU_C,
        "share_memory": 32 * 36 / MEM_C,
        "dominant_resource": "gpu",
        "preemptions_suffered": {"low": 1},
        "preemptions_caused": {},
        "gpu_hours_lost": 3.0,
        "idle_allocated": 0.0,  # d-0 at 60 %
        "idle_share": 0.0,
        "starvation_incidents": 0,  # s-carry's began the week before (S − 5 h)
        "gang_stalls": 0,
    },
    "audio": {
        "namespaces": ("audio",),
        "used": 0.0,
        "entitlement": 0.0,
        "entitlement_source": "none",
        "attainment": None,
        "borrowed": 0.0,
        "lent": 0.0,
        "demand": 0.0,
        "fair_share": 0.0,
        "satisfaction": None,  # no demand: no x, and out of Jain's index
        "share_gpu": None,  # no usage series at all: missing, not 0
        "share_cpu": None,
        "share_memory": None,
        "dominant_resource": None,
        "preemptions_suffered": {},
        "preemptions_caused": {},
        "gpu_hours_lost": 0.0,
        "idle_allocated": None,
        "idle_share": None,
        "starvation_incidents": 0,
        "gang_stalls": 0,
    },
}


def test_the_report_names_the_week_and_every_team(report: FairnessReport) -> None:
    assert (report.week, report.timezone, report.start, report.end) == ("2023-W46", "UTC", S, E)
    assert [t.team for t in report.teams] == ["audio", "nlp", "speech", "vision"]


@pytest.mark.parametrize("team", sorted(EXPECTED))
def test_each_teams_figures_match_the_hand_count(report: FairnessReport, team: str) -> None:
    got = team_figures(report, team)
    assert got == {k: exact(v) for k, v in EXPECTED[team].items()}


def test_coverage_per_source_is_162_of_168_hours_and_marked_partial(report: FairnessReport) -> None:
    # The six-hour gap: no KSM, DCGM or Watchtower series, and no heartbeat of the history.
    got = {c.name: (c.hours_present, c.hours_expected) for c in report.coverage}
    assert got == {
        name: (pytest.approx(162.0), pytest.approx(168.0))
        for name in ("kube-state-metrics", "dcgm-exporter", "watchtower", "watchtower history")
    }
    # 162 / 168 = 96.4 %: each source named as partial, rounded down.
    assert list(report.notes) == [  # and nothing else: Prometheus answered, the cluster is known
        f"{name} covered 162.0 of 168.0 hours (96 %): the figures it feeds are partial"
        for name in ("kube-state-metrics", "dcgm-exporter", "watchtower", "watchtower history")
    ]


def test_capacity_and_where_the_gpu_hours_went(report: FairnessReport) -> None:
    c = report.cluster
    assert c.capacity_gpus == pytest.approx(24.0)
    b = c.breakdown
    got = {
        "capacity": b.capacity,
        "allocated_busy": b.allocated_busy,
        "allocated_idle": b.allocated_idle,
        "planned": b.planned,
        "free_idle": b.free_idle,
        "unavailable": b.unavailable,
    }
    assert got == {
        "capacity": exact(3888.0),  # 24 × 162 h
        "allocated_busy": exact(1464.0 - 720.0),  # allocated 936 + 456 + 72, less the idle
        "allocated_idle": exact(720.0),  # b-0 360 + c-0 360
        "planned": exact(16.0 + 24.0),  # speech's 12 waiting: 8 free for 2 h, then 12 of 16 for 2 h
        "free_idle": exact(3888.0 - 1464.0 - 40.0 - 208.0),  # = 2176
        "unavailable": exact(8 * 24 + 8 * 2.0),  # n3 cordoned a day, n1 not Ready 2 h
    }
    parts = [b.allocated_busy, b.allocated_idle, b.planned, b.free_idle, b.unavailable]
    assert sum(p or 0.0 for p in parts) == pytest.approx(3888.0)


def test_jains_index_this_week_and_last_leaves_the_team_without_demand_out(report: FairnessReport) -> None:
    c = report.cluster
    assert c.teams_with_demand == 3  # audio has none
    assert c.jain == exact(JAIN_THIS)  # ≈ 0.870
    assert c.jain_last_week == exact(JAIN_LAST)  # ≈ 0.996
    # Had audio (x would be 0) been counted, the index would be lower: the figure tells the two apart.
    assert jain([936 / 3219, 456 / 548, 72 / 121, 0.0]) < JAIN_THIS - 0.1


def test_the_trend_has_eight_weeks_two_of_them_with_data(report: FairnessReport) -> None:
    got = [(p.week, p.jain, p.used, p.capacity, p.idle_share) for p in report.cluster.trend]
    missing = [(f"2023-W{w}", None, None, None, None) for w in range(39, 45)]  # nothing in Prometheus
    assert got == [
        *missing,
        ("2023-W45", exact(JAIN_LAST), exact(1464.0), exact(3888.0), exact(720 / 1464)),
        ("2023-W46", exact(JAIN_THIS), exact(1464.0), exact(3888.0), exact(720 / 1464)),
    ]


def test_waits_per_tier_with_the_censored_counted_not_dropped(report: FairnessReport) -> None:
    def waits(team: str) -> tuple[TierWaits, ...]:
        t = report.team(team)
        assert t is not None
        return t.waits

    # vision high: 600, 1200, 10800 s: p50 the ⌈1.5⌉ = 2nd, p95 the ⌈2.85⌉ = 3rd. low: v-prep's 4 h
    # (begun the week before, ended in this one: counted whole), v-scratch gone (left out), v-big still
    # waiting: censored, 100 h old at E.
    assert waits("vision") == (
        TierWaits("high", 3, 1200.0, 10800.0, 10800.0, 0, None),
        TierWaits("low", 1, 14400.0, 14400.0, 14400.0, 1, 100 * H),
    )
    # nlp medium: one finished (1 h), two censored: n-long 10 h and n-late 3 h old at E, the oldest 10 h.
    assert waits("nlp") == (
        TierWaits("medium", 1, 3600.0, 3600.0, 3600.0, 2, 10 * H),
        TierWaits("low", 1, 7200.0, 7200.0, 7200.0, 0, None),
    )
    # speech low: 4 h and s-carry's 14 h: p50 the 1st, p95 the ⌈1.9⌉ = 2nd.
    assert waits("speech") == (TierWaits("low", 2, 4 * H, 14 * H, 14 * H, 0, None),)
    assert waits("audio") == ()


def test_long_running_and_top_waiting_lists(report: FairnessReport) -> None:
    vision, speech, nlp = (report.team(t) for t in ("vision", "speech", "nlp"))
    assert vision is not None and speech is not None and nlp is not None
    # b-0 has run from day 3 to E: 96 h > 72 h. s-serve's exactly 72 h is not longer than 72 h.
    assert vision.long_running == (WorkloadLine("vision-train", "Pod/b-0", "low", 4, 96 * H),)
    assert speech.long_running == ()
    # Longest first, each up to E (the censored ones' ages at E), the gone one included.
    assert [(w.workload, w.seconds) for w in vision.top_waiting] == [
        ("Workload/v-big", 100 * H),
        ("Job/v-prep", 4 * H),
        ("Workload/v-tune", 3 * H),
        ("Pod/v-scratch", 1800.0),
        ("PodGroup/v-gang", 1200.0),
        ("Pod/v-eval", 600.0),
    ]
    assert [(w.workload, w.seconds) for w in nlp.top_waiting] == [
        ("Workload/n-long", 10 * H),
        ("Pod/n-late", 3 * H),
        ("Pod/n-small", 2 * H),
        ("Job/n-quota", 1 * H),
    ]
    assert [(w.workload, w.gpus, w.seconds) for w in speech.top_waiting] == [
        ("Pod/s-carry", 1, 14 * H),
        ("Job/s-train", 12, 4 * H),
    ]


def test_the_csv_door_carries_the_same_figures_and_empty_cells_for_missing(report: FairnessReport) -> None:
    rows = {r["team"]: r for r in csv.DictReader(io.StringIO(report_csv(report)))}
    assert sorted(rows) == ["audio", "nlp", "speech", "vision"]

    def num(team: str, column: str) -> float | None:
        cell = rows[team][column]
        return None if cell == "" else float(cell)

    for team, figures in EXPECTED.items():
        for key, column in (
            ("used", "used_gpu_hours"),
            ("entitlement", "entitlement_gpu_hours"),
            ("demand", "demand_gpu_hours"),
            ("fair_share", "fair_share_gpu_hours"),
            ("satisfaction", "satisfaction"),
            ("attainment", "attainment"),
            ("idle_share", "idle_share"),
        ):
            want = figures[key]
            assert num(team, column) == (None if want is None else pytest.approx(want, abs=1e-6)), (team, key)
    assert {r["jain_cluster"] for r in rows.values()} == {repr(round(JAIN_THIS, 6))}
    # Tier columns in the configured order of the tiers the week has: high, medium, low.
    assert num("vision", "waits_censored_low") == 1 and num("vision", "censored_oldest_s_low") == 100 * H
    assert num("nlp", "wait_p95_s_medium") == 3600 and num("nlp", "waits_censored_medium") == 2
    assert num("speech", "wait_p95_s_low") == 14 * H and rows["speech"]["wait_p95_s_high"] == ""
