"""The start estimate and "stuck despite capacity" as the queue JSON, the status page and the workload
page show them."""

from __future__ import annotations

import httpx
import orjson
from markupsafe import escape

from tests.fixtures.scenario import NO_GPU, NOW
from tests.unit.api.conftest import Service, make_service
from watchtower.simulator import objects as o

MIN = 60.0


def _service() -> Service:
    s = make_service(evaluate=False)
    w = s.container.queue_tracker
    # Recent high-tier waits (min) 5, 12, 20, 30, 45, 60: serve-canary has waited 10 min, so 12..60 are
    # longer, their median 30 min → it starts in about 20 min.
    for i, m in enumerate((5, 12, 20, 30, 45, 60)):
        w.history.record("high", at=NOW - 3600 + i, wait=m * MIN)
    # An empty node: debug-1 (8 GPUs, waited 20 min) fits there, yet the scheduler's word is "Insufficient".
    w.on_change("Node", "ADDED", orjson.dumps(o.node("spare-1")))
    w.evaluate(NOW)
    return s


async def _get(s: Service, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        return await c.get(path)


async def test_the_queue_json_gives_position_estimate_and_stuck() -> None:
    s = _service()
    body = (await _get(s, "/api/v1/queue")).json()
    by = {w["name"]: w for w in body["workloads"]}
    canary = by["serve-canary"]
    assert canary["position_in_tier"] == 1
    assert canary["start_estimate"] == {
        "start_in_seconds": 20 * MIN,
        "starts_at": "2027-01-15T08:20:00Z",
        "samples": 5,
        "basis": "from 5 high pods scheduled in the last 6 h that waited longer than its 10m: median 30m",
        "text": "estimate: starts in about 20m (from 5 high pods scheduled in the last 6 h that waited "
        "longer than its 10m: median 30m)",
        # No estimate of its tier checked yet (issue 33): no range, no record.
        "range_seconds": None,
        "accuracy": None,
    }
    # It has waited exactly queue.stuck_after (10 min), and spare-1 has room for it too.
    assert canary["stuck_despite_capacity"]["node"] == "spare-1"
    assert by["sweep-7"]["stuck_despite_capacity"] is None  # low tier head: waited 5 min only
    debug = by["debug-1"]
    assert debug["start_estimate"]["text"] == "no estimate: no critical pods scheduled in the last 6 h"
    assert debug["stuck_despite_capacity"] == {
        "pod": "debug-1",
        "node": "spare-1",
        "node_taints": [],
        "scheduler_name": "default-scheduler",
        "scheduler_said": NO_GPU,
        "likely_causes": [],
        "cluster_queue": None,  # not a Kueue-held job
        "quota_free_gpus": None,
        "why": f"fits on node spare-1 by free GPUs, CPU and memory, yet the scheduler says: {NO_GPU}",
    }
    assert by["detector"]["position_in_tier"] is None
    assert (
        by["detector"]["start_estimate"]["text"]
        == "no estimate: refused by quota: it starts once quota frees"
    )


async def test_the_status_page_and_the_workload_page_say_it() -> None:
    s = _service()
    page = (await _get(s, "/")).text
    assert "#1 in its tier in the scheduler's queue · estimate: starts in about 20m (from 5 high pods" in page
    assert "stuck despite capacity: fits on node spare-1 by free GPUs, CPU and memory" in page
    own = (await _get(s, "/workloads/nlp/serve-canary")).text
    assert "place in its tier" in own and "#1" in own
    assert str(escape("estimate: starts in about 20m (from 5 high pods")) in own
    debug = (await _get(s, "/workloads/ops/debug-1")).text
    assert "stuck despite capacity" in debug and str(escape(NO_GPU)) in debug
