"""A Kueue-held job shown: the queue JSON's Kueue fields and ClusterQueues, the status page's source, the
workload page's Kueue section (queue, place, admission and scheduling waits), /metrics' `reason="kueue"`
and `analyze` reading Kueue's kinds from a dump.

The objects are tests/fixtures/real/kueue-shaped-*.json (shaped from Kueue's testdata, see its README)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import orjson
from services.scenario import NOW

from watchtower.adapters.sim import kueue_objects as k
from watchtower.adapters.sim import objects as o
from watchtower.domain.promql import PENDING_WORKLOADS

from .conftest import Service, make_service

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
AT = NOW + 20 * 60  # the fixtures' Workload was made at NOW + 1
KINDS = {"Workload": "KueueWorkload"}


def items() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads((REAL / "kueue-shaped-job-pending.json").read_text())["items"]
    return out


def service() -> Service:
    s = make_service(evaluate=False)
    w = s.container.watcher
    for obj in items():
        w.on_change(KINDS.get(obj["kind"], obj["kind"]), "ADDED", orjson.dumps(obj))
    body = k.pending_workloads(
        [("vision", k.workload_name("Job", "resnet", o.new_uid("job/resnet")), "team", 1)]
    )
    w.on_kueue_positions(
        s.container.watcher.ingestor.decoder.pending_positions(orjson.dumps(body)), {"team-cq"}
    )
    w.evaluate(AT)
    return s


async def get(s: Service, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        r = await c.get(path)
    assert r.status_code == 200, (path, r.text)
    return r


async def test_the_queue_json_and_pages_show_a_job_kueue_holds() -> None:
    s = service()
    assert s.container.watcher.kueue_waiting_queues() == {"team-cq"}
    body = (await get(s, "/api/v1/queue")).json()
    (w,) = [x for x in body["workloads"] if x["name"] == "resnet"]
    assert (w["kind"], w["source"], w["state"], w["tier"], w["gpus_requested"]) == (
        "Job",
        "kueue",
        "pending",
        "critical",
        8,
    )
    assert w["kueue"]["position"] == 0 and w["kueue"]["cluster_queue"] == "team-cq"
    assert w["admission_wait_seconds"] == w["wait_seconds"] == 20 * 60 - 1
    assert [q["name"] for q in body["kueue_queues"]] == ["team-cq"]
    assert body["kueue_queues"][0]["teams"] == ["vision"]
    status = (await get(s, "/")).text
    assert "read from Kueue Workload job-resnet-" in status
    page = (await get(s, "/workloads/vision/resnet")).text
    assert 'id="kueue"' in page and "<dd>team → team-cq</dd>" in page
    assert '<dd class="kueue-position">#1 in its ClusterQueue</dd>' in page
    assert '<dd class="admission-wait">19m59s</dd>' in page and 'class="scheduling-wait"' not in page
    metrics = (await get(s, "/metrics")).text
    assert f'{PENDING_WORKLOADS}{{namespace="vision",reason="kueue",tier="critical"}} 1.0' in metrics


def test_analyze_reads_kueue_kinds_from_a_dump() -> None:
    from watchtower.adapters.kube.decoder import ObjectDecoder
    from watchtower.config import Settings
    from watchtower.services.analyze import analysis_dict, analyze

    settings = Settings()
    result = analyze(
        orjson.dumps(o.object_list(items())),
        policy=settings.queue_policy(),
        decoder=ObjectDecoder(team_label=settings.teams.label),
        at=AT,
    )
    doc = analysis_dict(result, settings.queue_policy(), settings)
    (w,) = [x for x in doc["workloads"] if x["name"] == "resnet"]
    assert (w["source"], w["kueue"]["local_queue"], w["kueue"]["position"]) == ("kueue", "team", None)
    assert doc["kueue_queues"][0]["gpus_nominal"] == 8
    assert doc["ignored_kinds"] == {}
