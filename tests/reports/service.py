"""The service with the hand-made report as its report source, on the scenario cluster, for page tests."""

from __future__ import annotations

from fastapi import FastAPI

from tests.fixtures.scenario import ManualClock, ReplaySource, demo_cluster, list_everything
from tests.reports.sample import StandIn
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container
from watchtower.config import Settings


def report_app(source: StandIn | None = None, *, with_report: bool = True) -> tuple[FastAPI, StandIn]:
    """Return the app (listed and evaluated at the scenario's NOW, 2027-01-15) and its report source."""
    source = source or StandIn()
    clock = ManualClock()
    replay = ReplaySource(demo_cluster())
    container = build_container(
        Settings(),
        clock=clock,
        source_health=replay.feed_health,
        source_name="replay",
        report_source=source if with_report else None,
    )
    list_everything(container.queue_tracker, replay.cluster)
    replay.listed = set(replay.cluster.objects)
    container.queue_tracker.evaluate(clock.now())
    return create_app(container), source
