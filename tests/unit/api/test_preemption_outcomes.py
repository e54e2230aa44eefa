"""What each preemption came to, as a user reads it: /api/v1/preemptions, the status page and /metrics, on the
service built by the composition root over the demo scenario (tests/fixtures/scenario.py: `old-batch-0` on
gpu-3 preempted by `bert-worker-0`, "Preempted by pod <uid> on node gpu-3")."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.scenario import demo_cluster
from tests.unit.api.conftest import Service, make_service

LOST = 4 * 3900 / 3600  # old-batch-0: 4 GPUs for 3,900 s


def preemptor_bound_on(node: str) -> Service:
    c = demo_cluster()
    [bert] = [p for p in c.objects["Pod"] if p["metadata"]["name"] == "bert-worker-0"]
    bert["spec"]["nodeName"] = node
    return make_service(cluster=c)


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name
    }


async def read(s: Service) -> tuple[dict, str, str]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        [p] = (await c.get("/api/v1/preemptions")).json()["preemptions"]
        page = (await c.get("/")).text
        metrics = (await c.get("/metrics")).text
    section = page.split('<section id="preemptions">', 1)[1].split("</section>", 1)[0]
    [row] = [r for r in section.split("<tr>") if "old-batch-0" in r]
    return p, row, metrics


async def test_a_preemptor_that_started_where_its_victim_was_helped() -> None:
    p, row, metrics = await read(make_service())
    o = p["outcome"]
    assert (o["verdict"], o["reason"], o["node"], o["victim_nodes"]) == ("helped", None, "gpu-3", ["gpu-3"])
    assert o["gpu_hours_lost"] == pytest.approx(LOST, abs=1e-5) and o["victims"] == 1
    assert "helped: started on gpu-3" in row
    outcomes = samples(metrics, "watchtower_preemption_outcomes_total")
    key = (("outcome", "helped"), ("preemptor_tier", "medium"), ("victim_tier", "low"))
    assert outcomes == {key: 1.0}
    assert samples(metrics, "watchtower_preemptions_unhelpful_total") == {}


async def test_a_preemptor_that_started_on_another_node_did_not_help_and_its_gpu_hours_are_counted() -> None:
    s = preemptor_bound_on("gpu-1")
    p, row, metrics = await read(s)
    o = p["outcome"]
    assert (o["verdict"], o["reason"], o["node"]) == ("did_not_help", "started_elsewhere", "gpu-1")
    assert "did not help: started on gpu-1, not on gpu-3" in row
    tiers = (("preemptor_tier", "medium"), ("victim_tier", "low"))
    assert samples(metrics, "watchtower_preemptions_unhelpful_total") == {
        (*tiers[:1], ("reason", "started_elsewhere"), *tiers[1:]): 1.0
    }
    [lost] = samples(metrics, "watchtower_preemptions_unhelpful_gpu_hours_total").values()
    assert lost == pytest.approx(LOST, abs=1e-5)
    # Counted once: later evaluations add nothing.
    s.clock.t += 3600
    s.container.queue_tracker.evaluate(s.clock.now())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        again = (await c.get("/metrics")).text
    assert sum(samples(again, "watchtower_preemptions_unhelpful_total").values()) == 1.0
