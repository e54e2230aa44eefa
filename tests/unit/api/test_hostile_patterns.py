"""Hostile regular expressions cannot freeze the service: silences (and a configured route) whose patterns
make a backtracking matcher run for hours leave the tick and /healthz as prompt as without them, because
matchers are matched by RE2 as Alertmanager matches them; a pattern RE2 refuses is a 422 naming why."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.scenario import NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from tests.unit.api.conftest import TOKEN
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.app import create_app
from watchtower.api.deps import require_token
from watchtower.api.routes.alerts import build_router
from watchtower.bootstrap import build_container
from watchtower.config.loading import settings_from_mapping
from watchtower.runtime.tick_loop import TickLoop
from watchtower.simulator import objects as o

# Python's `re` takes seconds on 13 characters of `(.*.*)*X` and four times longer per two more; these
# labels are 30 and more, so a backtracking matcher would not finish at all.
LONG_NAMESPACE = "research-foundation-models-z"
LONG_WORKLOAD = "pretrain-mixture-of-experts-0"
CATASTROPHIC = ["(.*.*)*X", "(a|aa)*b", "(x+x+)+y", "((.*)*)*[0-9]{3}Q"]
AUTH = {"authorization": f"Bearer {TOKEN}"}


def silence(name: str, value: str, *, equal: bool = True) -> dict[str, object]:
    return {
        "matchers": [{"name": name, "value": value, "isRegex": True, "isEqual": equal}],
        "endsAt": "2027-03-01T00:00:00Z",
        "createdBy": "oncall",
        "comment": "hostile pattern",
    }


async def timed(work: object) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = await work  # type: ignore[misc]
    return time.perf_counter() - t0, out


@pytest.fixture
def watchdog(request: pytest.FixtureRequest) -> Iterator[None]:
    """End the run, with every thread's stack on the terminal, if the test is still going after two minutes.
    A backtracking matcher holds the GIL in C, so neither pytest-timeout's signal nor its thread could
    fire; faulthandler's watchdog is a C thread that needs no GIL. It writes to the real stderr (a copy of
    it taken outside pytest's capture), since the process ends before the captured output is shown."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        terminal = os.fdopen(os.dup(2), "w")
    faulthandler.dump_traceback_later(120, exit=True, file=terminal)
    yield
    faulthandler.cancel_dump_traceback_later()
    terminal.close()


async def test_catastrophic_patterns_leave_the_tick_and_healthz_prompt(
    tmp_path: Path, watchdog: None
) -> None:
    settings = settings_from_mapping(
        {
            "server": {"api_token": TOKEN},
            "alerting": {
                "route": {
                    "receiver": "hook",
                    "routes": [{"matchers": ['namespace=~"(.*.*)*X"'], "receiver": "hook"}],
                },
                "receivers": [{"name": "hook", "webhooks": [{"url": "http://127.0.0.1:9/"}]}],
            },
        },
        env={},
    )
    cluster = demo_cluster()
    cluster.add(
        o.namespace(LONG_NAMESPACE),
        o.pod(
            name=LONG_WORKLOAD,
            namespace=LONG_NAMESPACE,
            created=NOW - 3 * 3600,
            gpus=8,
            priority=1_000_000,
            priority_class="urgent-debug",
            conditions=[
                o.unschedulable(NOW - 3 * 3600 + 5, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
            ],
        ),
    )
    source, clock = ReplaySource(cluster), ManualClock()
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    c = build_container(
        settings, clock=clock, source_health=source.feed_health, source_name="replay", alert_store=store
    )
    assert c.alerting is not None
    list_everything(c.queue_tracker, cluster)
    source.listed = set(cluster.objects)
    app = create_app(c, routers=[build_router(c.alerting.admin, require_token=require_token, clock=clock)])
    loop = TickLoop(c)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://watchtower.test"
        ) as http:
            await loop.tick()  # the first evaluation: the alerts start firing, the hostile route is tried
            plain_tick, _ = await timed(loop.tick())
            plain_health, r = await timed(http.get("/healthz"))
            assert r.status_code == 200

            ids = []
            for value in CATASTROPHIC:
                for name in ("namespace", "workload", "alertname"):
                    r = await http.post("/api/v1/silences", json=silence(name, value), headers=AUTH)
                    assert r.status_code == 201, r.text
                    ids.append(r.json()["silenceID"])
            # Not equal: every alert passes `!~`, but with another matcher that needs a label it mutes none.
            negated = silence("workload", "(.*.*)*X", equal=False)
            negated["matchers"].append(
                {"name": "namespace", "value": "nowhere", "isRegex": False, "isEqual": True}
            )  # type: ignore[attr-defined]
            assert (await http.post("/api/v1/silences", json=negated, headers=AUTH)).status_code == 201
            # One that matches (the namespace ends in -z): the patterns still mean what they say.
            r = await http.post("/api/v1/silences", json=silence("namespace", "(.*.*)*-z"), headers=AUTH)
            assert r.status_code == 201, r.text
            muting = r.json()["silenceID"]

            # The tick evaluating every silence against every alert, with /healthz asked meanwhile.
            (hostile_tick, _), (health, r) = await asyncio.gather(
                timed(loop.tick()), timed(http.get("/healthz"))
            )
            assert r.status_code == 200
            assert hostile_tick <= 5 * plain_tick + 0.5, (hostile_tick, plain_tick)
            assert health <= 10 * plain_health + 0.5, (health, plain_health)

            alerts = (await http.get("/api/v1/alerts")).json()
            ours = [a for a in alerts if a["labels"].get("workload") == LONG_WORKLOAD]
            assert ours and all(a["silencedBy"] == [muting] for a in ours)
            assert all(not set(a["silencedBy"]) & set(ids) for a in alerts)

            # RE2 refuses backreferences, lookarounds and repetitions over 1000: a 422 that says so.
            for value, reason in (("(a)\\1", "\\1"), ("(?=x)a", "(?="), ("a{1001}", "{1001}")):
                r = await http.post("/api/v1/silences", json=silence("namespace", value), headers=AUTH)
                assert r.status_code == 422, r.text
                assert "RE2" in r.json()["detail"] and reason in r.json()["detail"], r.text
    finally:
        store.close()
