"""The fleet page on a replica configured with two other clusters: one a real Watchtower served by uvicorn on
127.0.0.1 (the demo cluster, alerting on), one that takes the connection and never answers. The page shows
the first's figures as its own API gives them, names the second as missing, and escapes every name."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.scenario import HOSTILE, ManualClock, ReplaySource, demo_cluster, list_everything
from tests.unit.api.conftest import live_server
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api import deps
from watchtower.api.app import create_app
from watchtower.api.container import Container
from watchtower.api.routes.alerts import build_router
from watchtower.bootstrap import build_container
from watchtower.config import ConfigError, settings_from_mapping
from watchtower.config.model import Settings


def _service(settings: Settings, store: SQLiteAlertStore | None = None) -> tuple[Container, object]:
    clock = ManualClock()
    source = ReplaySource(demo_cluster())
    c = build_container(
        settings, clock=clock, source_health=source.feed_health, source_name="replay", alert_store=store
    )
    list_everything(c.queue_tracker, source.cluster)
    c.queue_tracker.evaluate(clock.now())
    routers = []
    if c.alerting is not None:
        routers.append(build_router(c.alerting.admin, require_token=deps.require_token, clock=clock))
    return c, create_app(c, routers=routers)


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A port that takes connections and never answers: a Watchtower hung, or a black-holed route."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[Container, str]]:
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    c, app = _service(settings_from_mapping({"cluster": {"name": "prod-b"}}, env={}), store)
    try:
        with live_server(app) as url:  # type: ignore[arg-type]
            yield c, url
    finally:
        store.close()


async def test_the_fleet_lists_the_answering_cluster_and_names_the_silent_one(remote) -> None:
    other, url = remote
    await other.alerting.on_tick(other.queue_tracker.latest)  # its alerts, as its tick loop would raise them
    hostile = "prod-a " + HOSTILE
    with silent_server() as dead:
        settings = settings_from_mapping(
            {
                "cluster": {"name": hostile},
                "server": {"external_url": "https://wt.prod-a.example"},
                "fleet": {
                    "clusters": [{"name": "prod-b", "url": url}, {"name": "prod-c", "url": dead}],
                    "timeout": "1s",
                },
            },
            env={},
        )
        _, app = _service(settings)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://here") as c:
            fleet = (await c.get("/api/v1/fleet")).json()["clusters"]
            page = await c.get("/fleet")
            status = (await c.get("/")).text
        async with httpx.AsyncClient(base_url=url) as direct:
            queues = {
                t: (await direct.get("/api/v1/queue", params={"tier": t, "state": "waiting"})).json()
                for t in ("critical", "high", "medium", "low")
            }
            alerts = (await direct.get("/api/v1/alerts")).json()

    here, b, dead_row = fleet
    assert (here["name"], here["here"], here["url"]) == (hostile, True, "https://wt.prod-a.example/")
    # The answering cluster: its figures as its own API gives them, linking to its own page.
    assert (b["name"], b["answered"], b["url"]) == ("prod-b", True, url + "/")
    by_tier = {t["tier"]: t for t in b["tiers"]}
    for tier, q in queues.items():
        assert by_tier[tier]["waiting"] == q["total"]
        if q["workloads"]:
            longest = max(w["wait_seconds"] for w in q["workloads"])
            assert by_tier[tier]["oldest_wait_seconds"] == longest
            assert by_tier[tier]["warn_after_seconds"] == q["workloads"][0]["warn_after_seconds"]
    assert sum(t["waiting"] for t in b["tiers"]) > 0  # the demo cluster has work waiting
    # Firing and neither silenced nor inhibited, as Alertmanager counts the active ones.
    active = [a for a in alerts if a["state"] == "firing" and not a["silencedBy"] and not a["inhibitedBy"]]
    assert b["firing_alerts"] == len(active) > 0
    assert here["firing_alerts"] is None  # no alerting on this replica: not zero
    assert b["gpus_free"] == other.queue_tracker.latest.snapshot.capacity.free_total
    assert b["gpus_idle"] is None  # no Prometheus there: not measured, not zero
    # The same cluster read here and read over HTTP gives the same row: one summary for both.
    assert here["tiers"] == b["tiers"] and here["gpus_free"] == b["gpus_free"]
    # The silent one: named, with why, and no figures at all.
    assert (dead_row["name"], dead_row["answered"]) == ("prod-c", False)
    assert dead_row["missing"] == "no answer within 1 s"
    assert dead_row["tiers"] == [] and dead_row["gpus_free"] is None and dead_row["firing_alerts"] is None

    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    html = page.text
    assert HOSTILE not in html and "&lt;script&gt;" in html  # the hostile name is inert text
    assert f'<a href="{url}/">prod-b</a>' in html
    assert "Not answering" in html and "prod-c" in html and "no answer within 1 s" in html
    assert '<a href="/fleet">Fleet</a>' in status


async def test_without_other_clusters_the_page_shows_this_one_and_the_status_page_no_link() -> None:
    _, app = _service(settings_from_mapping({"cluster": {"name": "solo"}}, env={}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://here") as c:
        (row,) = (await c.get("/api/v1/fleet")).json()["clusters"]
        status = (await c.get("/")).text
    assert row["name"] == "solo" and row["answered"] and row["firing_alerts"] is None  # no alerting here
    assert 'href="/fleet"' not in status


async def test_a_refused_connection_and_an_unreadable_token_are_named(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once closed
    settings = settings_from_mapping(
        {
            "fleet": {
                "clusters": [
                    {"name": "refused", "url": closed},
                    {"name": "tokenless", "url": closed, "token_file": str(tmp_path / "absent")},
                ]
            }
        },
        env={},
    )
    _, app = _service(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://here") as c:
        _, refused, tokenless = (await c.get("/api/v1/fleet")).json()["clusters"]
    assert not refused["answered"] and refused["missing"].startswith("unreachable: ConnectError")
    assert not tokenless["answered"] and "token_file cannot be read" in tokenless["missing"]


@pytest.mark.parametrize(
    "fleet, why",
    [
        ({"clusters": [{"name": "a", "url": "watchtower.example"}]}, "not an http(s) URL"),
        ({"clusters": [{"name": "a", "url": "http://x"}, {"name": "a", "url": "http://y"}]}, "twice"),
        ({"clusters": [{"name": "a\nb", "url": "http://x"}]}, "one line"),
        ({"timeout": "0s"}, "fleet.timeout"),
    ],
)
def test_a_bad_fleet_is_a_clear_configuration_error(fleet, why) -> None:
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({"fleet": fleet}, env={})
    assert why in str(e.value)
