"""Work that can never start as the queue JSON, the workload's JSON and the status page show it, and the
service's own alert, on the demo scenario's cluster (four 8-GPU nodes, busy) with a 16-GPU pod added."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson

from tests.fixtures.scenario import NO_GPU, NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from tests.unit.api.conftest import Service, make_service
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.app import create_app
from watchtower.api.deps import require_token
from watchtower.api.routes.alerts import build_router
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.simulator import objects as o

TEXT = "can never start as configured: asks 16 GPUs per pod, the largest schedulable node has 8"


def _service() -> Service:
    s = make_service(evaluate=False)
    giant = o.pod(
        name="giant",
        namespace="nlp",
        created=NOW - 120,
        gpus=16,
        priority_class="experiment",
        conditions=[o.unschedulable(NOW - 119, NO_GPU)],
    )
    s.container.queue_tracker.on_change("Pod", "ADDED", orjson.dumps(giant))
    s.container.queue_tracker.evaluate(NOW)
    return s


async def _get(s: Service, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        return await c.get(path)


async def test_the_queue_and_workload_json_say_never_with_its_numbers_and_no_estimate() -> None:
    s = _service()
    r = await _get(s, "/api/v1/queue")
    assert r.status_code == 200
    by = {w["name"]: w for w in r.json()["workloads"]}
    giant = by["giant"]
    assert giant["never"] == {
        "reason": "node_resources",
        "asks": "16 GPUs per pod",
        "limit": "the largest schedulable node has 8",
        "source": "nodes",
        "text": TEXT,
    }
    assert giant["why"].startswith(TEXT)
    assert giant["start_estimate"]["start_in_seconds"] is None
    assert giant["start_estimate"]["text"] == f"never: {TEXT}"
    # The rest of the scenario waits for busy 8-GPU nodes, a full quota, Kueue: none of it is never.
    assert [w["name"] for w in by.values() if w["never"] is not None] == ["giant"]
    own = (await _get(s, "/api/v1/workloads/nlp/giant")).json()
    assert own["workload"]["never"]["text"] == TEXT


async def test_the_status_page_marks_it_never_and_says_why() -> None:
    s = _service()
    page = (await _get(s, "/")).text
    assert TEXT in page
    assert '<span class="pill never"' in page


async def test_the_service_alert_fires_at_the_first_evaluation(tmp_path: Path) -> None:
    """The service's alert path: the tick's rules, the lifecycle (no `for`), the store, the API's listing."""
    cluster = demo_cluster()
    cluster.add(
        o.pod(
            name="giant",
            namespace="nlp",
            created=NOW - 120,
            gpus=16,
            priority_class="experiment",
            conditions=[o.unschedulable(NOW - 119, NO_GPU)],
        )
    )
    source, clock = ReplaySource(cluster), ManualClock()
    c = build_container(
        Settings().model_copy(
            update={
                "alerting": Settings().alerting.model_copy(
                    update={"rules": Settings().alerting.rules.model_copy(update={"pending_for": 300.0})}
                )
            }
        ),
        clock=clock,
        source_health=source.feed_health,
        source_name="replay",
        alert_store=SQLiteAlertStore(tmp_path / "alerts.db"),
    )
    assert c.alerting is not None
    list_everything(c.queue_tracker, cluster)
    source.listed = set(cluster.objects)
    await c.alerting.on_tick(c.queue_tracker.evaluate(clock.now()))
    app = create_app(c, routers=[build_router(c.alerting.admin, require_token=require_token, clock=clock)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        alerts = (await http.get("/api/v1/alerts")).json()
    found = [a for a in alerts if a["labels"]["alertname"] == "WorkloadCanNeverStart"]
    # Firing at the first evaluation although every other rule waits its 5-minute `for`.
    assert [(a["labels"]["workload"], a["state"]) for a in found] == [("giant", "firing")]
    assert found[0]["annotations"]["summary"] == f"Pod nlp/giant {TEXT}"
