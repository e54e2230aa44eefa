"""The status page when the cluster cannot be reached: say so, instead of "0 workloads waiting"."""

from __future__ import annotations

import dataclasses

import httpx

from tests.unit.api.conftest import Service, make_service
from watchtower.domain.health import KindFreshness, SourceHealth
from watchtower.domain.timefmt import rfc3339

ERROR = "NewConnectionError: <b>Connection refused</b>"


def unreachable(s: Service, down_for: float) -> float:
    """Make the replay source report an outage of `down_for` seconds, evaluate; return when it began."""
    since = s.clock.now() - down_for
    s.source.healthy = False
    healthy = s.source.feed_health
    s.container.queue_tracker.source_health = lambda: dataclasses.replace(
        healthy(), down_since=since, last_error=ERROR
    )
    s.container.queue_tracker.evaluate(s.clock.now())
    return since


async def page(s: Service) -> str:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        r = await c.get("/")
    assert r.status_code == 200
    return r.text


async def test_nothing_ever_listed_says_kubernetes_is_unreachable_not_that_nothing_waits() -> None:
    s = make_service(listed=False, evaluate=False)
    since = unreachable(s, 300)
    html = await page(s)
    assert (
        f"Kubernetes unreachable since {rfc3339(since)}, last error: "
        "NewConnectionError: &lt;b&gt;Connection refused&lt;/b&gt;"
    ) in html
    assert "the queue is not known, not empty" in html
    assert "workloads waiting" not in html and "Nothing waits" not in html
    assert "<b>Connection" not in html


async def test_a_picture_seen_before_the_outage_stays_under_a_banner() -> None:
    s = make_service()
    since = unreachable(s, 300)
    html = await page(s)
    banner = html.index(f"Kubernetes unreachable since {rfc3339(since)}, last error: NewConnectionError")
    assert "Down for 5m: what follows is the picture as last seen" in html
    assert banner < html.index("workloads waiting")


async def test_a_reachable_cluster_shows_no_banner(service: Service) -> None:
    html = await page(service)
    assert "Kubernetes unreachable" not in html and "workloads waiting" in html


async def test_an_outage_that_ended_is_still_said_with_how_long_the_picture_was_stale() -> None:
    s = make_service()
    healthy = s.source.feed_health
    now = s.clock.now()

    def recovered() -> SourceHealth:
        h = healthy()
        pods = KindFreshness(
            stale_seconds=0.0,
            detail={
                "last_outage_since": now - 100,
                "last_outage_seconds": 25.0,
                "last_outage_error": "WatchSilent: the watch carried nothing (no event, no bookmark) for 20s",
            },
        )
        return dataclasses.replace(h, kinds={**h.kinds, "Pod": pods})

    s.container.queue_tracker.source_health = recovered
    s.container.queue_tracker.evaluate(now)
    html = await page(s)
    assert "Kubernetes unreachable" not in html
    assert "The picture of Pod was stale for 25s, until 1m15s ago (WatchSilent: the watch carried" in html
