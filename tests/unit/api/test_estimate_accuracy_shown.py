"""How good the start estimates were, through the service: a week of checked estimates in a real SQLite store,
the estimate recorder the service runs at each tick, then what the workload's JSON, the status page,
`kubectl watchtower why` (on the same JSON) and `/metrics` show (issue 33)."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
from markupsafe import escape

from tests.fixtures.scenario import NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container, estimate_recorder
from watchtower.commands.kubectl.render import why
from watchtower.config import Settings
from watchtower.domain.estimate_accuracy import GivenEstimate
from watchtower.simulator import objects as o

MIN = 60.0
DAY = 86400.0


def checked(i: int, actual: float, *, tier: str = "high") -> GivenEstimate:
    """A wait two days ago whose first estimate said 10 min and which started `actual` seconds after it."""
    at = NOW - 2 * DAY + 1000 * i
    return GivenEstimate(
        f"wait:nlp/Pod/old-{i}@{at:.0f}",
        "nlp",
        f"Pod/old-{i}",
        tier,
        at,
        at,
        at + 10 * MIN,
        at + actual,
        "started",
    )


class Service:
    def __init__(self, tmp_path: Path, week: list[GivenEstimate]) -> None:
        self.store = SQLiteFairnessHistory(tmp_path / "state.db")
        self.store.record_estimates(week)
        self.clock = ManualClock()
        self.source = ReplaySource(demo_cluster())
        self.container = build_container(
            Settings(),
            clock=self.clock,
            source_health=self.source.feed_health,
            source_name="replay",
            history=self.store,
        )
        tracker = self.container.queue_tracker
        list_everything(tracker, self.source.cluster)
        # Recent high-tier waits (min) 5, 12, 20, 30, 45, 60: serve-canary has waited 10 min, so 12..60 are
        # longer, their median 30 min → it starts in about 20 min.
        for i, m in enumerate((5, 12, 20, 30, 45, 60)):
            tracker.history.record("high", at=NOW - 3600 + i, wait=m * MIN)
        recorder = estimate_recorder(self.container)
        assert recorder is not None  # the store is ours
        self.recorder = recorder
        self.app = create_app(self.container)

    async def tick(self, at: float) -> None:
        await self.recorder.on_tick(self.container.queue_tracker.evaluate(at))

    async def get(self, path: str) -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://t") as c:
            return await c.get(path)


async def test_the_estimate_shows_its_range_and_the_tiers_record_and_a_start_is_counted(
    tmp_path: Path,
) -> None:
    # Ten high waits last week, each estimated at 10 min: seven started at 10 min (error 0), three at 30 min
    # (error -20 min over 30: -2/3, outside ±50 %). Ratios actual/estimated: 1 x7, 3 x3 → 20th percentile 1,
    # 80th 3 (rank 7.2 of 0..9 lies among the 3s). serve-canary's 20 min then reads "20m-1h".
    s = Service(tmp_path, [checked(i, 10 * MIN if i < 7 else 30 * MIN) for i in range(10)])
    await s.tick(NOW)  # gives the first estimates and reads the week's figures
    await s.tick(NOW)  # this tick's estimates carry them (at the same time: the figures are round)
    detail = (await s.get("/api/v1/workloads/nlp/serve-canary")).json()
    e = detail["workload"]["start_estimate"]
    assert e["text"] == (
        "estimate: starts in 20m-1h (from 5 high pods scheduled in the last 6 h that waited longer than its "
        "10m: median 30m); estimates for this tier were within ±50 % for 7 in 10 workloads last week"
    )
    assert e["range_seconds"] == [20 * MIN, 60 * MIN]
    assert e["accuracy"] == {
        "checked": 10,
        "within": 7,
        "share_within": 0.7,
        "median_error": 0.0,
        "verdict": "fair",
        "text": "estimates for this tier were within ±50 % for 7 in 10 workloads last week",
    }
    page = (await s.get("/")).text
    assert str(escape("within ±50 % for 7 in 10 workloads last week")) in page
    # `kubectl watchtower why` on the same body.
    assert f"Estimate:    {e['text']}" in why(detail, wide=False)
    # Its first estimate (given at NOW: starts at NOW + 20 min) is in the store, once.
    (mine,) = [g for g in s.store.estimates_open() if g.workload == "Pod/serve-canary"]
    assert (mine.given_at, mine.estimated_start) == (NOW, NOW + 20 * MIN)
    # It starts 35 min later: estimated NOW + 20 min, started NOW + 35 min → -15 min over 35: -0.43, within.
    s.source.cluster.objects.pop(("Pod", "nlp", "serve-canary"), None)
    bound = o.pod(
        name="serve-canary",
        namespace="nlp",
        created=NOW - 600,
        gpus=8,
        priority=900_000,
        priority_class="online-serving",
        node="gpu-1",
        phase="Running",
        conditions=[o.scheduled(NOW + 35 * MIN)],
        start_time=NOW + 35 * MIN,
        running_since=NOW + 35 * MIN,
    )
    s.container.queue_tracker.on_change("Pod", "MODIFIED", orjson.dumps(bound))
    await s.tick(NOW + 35 * MIN)
    (got,) = [g for g in s.store.estimates_started(NOW, NOW + DAY) if g.workload == "Pod/serve-canary"]
    assert got.started == NOW + 35 * MIN
    metrics = (await s.get("/metrics")).text
    assert 'watchtower_start_estimate_error_ratio_count{tier="high"} 1.0' in metrics
    # -0.43: in the bucket up to -0.25, not in the one up to -0.5.
    assert 'watchtower_start_estimate_error_ratio_bucket{le="-0.5",tier="high"} 0.0' in metrics
    assert 'watchtower_start_estimate_error_ratio_bucket{le="-0.25",tier="high"} 1.0' in metrics
    s.store.close()


async def test_when_the_tiers_estimates_were_poor_the_page_and_the_json_say_so_instead_of_a_number(
    tmp_path: Path,
) -> None:
    # Ten high waits estimated at 10 min: three started at 10 min, seven at 40 min (error -30/40: -3/4).
    s = Service(tmp_path, [checked(i, 10 * MIN if i < 3 else 40 * MIN) for i in range(10)])
    await s.tick(NOW)
    await s.tick(NOW)
    detail = (await s.get("/api/v1/workloads/nlp/serve-canary")).json()
    e = detail["workload"]["start_estimate"]
    poor = "estimates for this tier were poor last week: within ±50 % for only 3 of 10 workloads"
    assert e["text"] == f"no estimate: {poor}"
    assert e["range_seconds"] is None and e["accuracy"]["verdict"] == "poor"
    page = (await s.get("/")).text
    assert str(escape(poor)) in page and "starts in about 20m" not in page
    assert f"Estimate:    no estimate: {poor}" in why(detail, wide=False)
    s.store.close()
