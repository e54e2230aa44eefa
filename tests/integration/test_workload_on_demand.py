"""A tick evaluates the waiting workloads only; a running workload's status is worked out per request."""

from __future__ import annotations

import httpx

from tests.fixtures.scenario import NOW, demo_cluster
from tests.unit.api.conftest import make_service
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config import Settings
from watchtower.services.analyze import analysis_dict, analyze


def _offline() -> dict:
    settings = Settings()
    decoder = ObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
    )
    a = analyze(demo_cluster().dump(), policy=settings.queue_policy(), decoder=decoder, at=NOW)
    return analysis_dict(a, settings.queue_policy(), settings)


async def test_a_running_workload_is_left_out_of_the_tick_but_answered_by_the_workload_endpoint() -> None:
    running = [w for w in _offline()["workloads"] if w["state"] == "running"]
    assert running, "the scenario has running workloads"
    s = make_service()
    picture = s.container.queue_tracker.latest
    assert picture is not None
    assert all(w.waiting for w in picture.snapshot.workloads)
    assert sum(picture.running_by_tier.values()) == len(running)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        listed = (await c.get("/api/v1/queue")).json()["workloads"]
        assert not any(w["state"] == "running" for w in listed)
        for want in running:
            r = await c.get(
                f"/api/v1/workloads/{want['namespace']}/{want['name']}", params={"kind": want["kind"]}
            )
            assert r.status_code == 200, r.text
            got = r.json()["workload"]
            # Queue positions belong to a tick; everything else is what analyze computes for the dump.
            assert {k: v for k, v in got.items() if not k.startswith("ahead")} == {
                k: v for k, v in want.items() if not k.startswith("ahead")
            }
