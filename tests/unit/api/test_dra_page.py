"""DRA GPUs on the pages: a workload's page lists its GPU claims and what the DynamicResources plugin's words
amount to; the status page marks work asking GPUs through claims and counts the GPUs ResourceSlices offer.
Fed with the real captured objects of tests/fixtures/real/dra (the API server and scheduler of v1.36.3)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from markupsafe import escape

from tests.fixtures import FIXTURES
from tests.unit.api.routes.test_workload_page import HOSTILE_NAME, page_client
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config.model import Settings
from watchtower.services.analyze import analysis_dict, analyze

POLICY = Settings().queue_policy()
REAL = FIXTURES / "real" / "dra" / "gpus-all-taken.json"


def real_objects() -> list[dict[str, Any]]:
    """The capture's objects, the waiting pod's claim renamed to a name no API server would take."""
    items = [i for i in json.loads(REAL.read_text())["items"] if i["kind"] != "Event"]
    for i in items:
        if i["kind"] == "ResourceClaim" and i["metadata"]["name"] == "waiting-gpus":
            i["metadata"]["name"] = HOSTILE_NAME
        if i["kind"] == "Pod" and i["metadata"]["name"] == "waiting":
            i["spec"]["resourceClaims"][0]["resourceClaimName"] = HOSTILE_NAME
    return items


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with await page_client(*real_objects()) as c:
        yield c


async def test_a_dra_workloads_page_lists_its_claim_and_says_gpus_are_short(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/workloads/e2e-dra/waiting")).text
    assert "GPU claims (DRA ResourceClaims)" in page
    row = (
        f'<tr class="claim"><td>{escape(HOSTILE_NAME)}</td><td>gpu.nvidia.com</td><td class="num">2</td>'
        "<td>no</td>"
    )
    assert row in page
    assert HOSTILE_NAME not in page  # escaped, never markup
    assert "GPUs short: no node has free devices for its claims" in page
    assert "cannot allocate all claims" in page


async def test_an_allocated_claims_devices_are_listed(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/workloads/e2e-dra/holder")
    assert r.status_code == 200, r.text
    [claim] = r.json()["workload"]["gpu_claims"]
    page = (await client.get("/workloads/e2e-dra/holder")).text
    assert f"<td>{claim['name']}</td>" in page and "<td>yes</td>" in page
    assert ", ".join(claim["devices"]) in page and len(claim["devices"]) == 4


async def test_the_status_page_marks_dra_work_and_counts_slice_gpus(client: httpx.AsyncClient) -> None:
    page = (await client.get("/")).text
    assert 'title="asked through DRA ResourceClaims">DRA</span>' in page
    assert "8 of them through DRA" in page
    queue = (await client.get("/api/v1/queue")).json()
    [w] = [w for w in queue["workloads"] if w["name"] == "waiting"]
    assert w["gpu_claims"][0]["name"] == HOSTILE_NAME and w["dra_problem"] == "shortage"


def test_analyze_counts_the_gpus_slices_publish_apart() -> None:
    data = json.dumps({"kind": "List", "apiVersion": "v1", "items": real_objects()}).encode()
    a = analyze(data, policy=POLICY, decoder=ObjectDecoder(), at=None)
    cap = analysis_dict(a, POLICY)["capacity"]
    assert (cap["gpus_allocatable"], cap["gpus_dra"]) == (8, 8)
    assert {n["name"]: n["dra"] for n in cap["nodes"]} == {"dra-gpu-1": 4, "dra-gpu-2": 4}


MISSING = REAL.parent / "missing-claim.json"


async def test_a_pod_whose_claim_does_not_exist_is_on_the_status_page_and_in_metrics() -> None:
    items = [i for i in json.loads(MISSING.read_text())["items"] if i["kind"] != "Event"]
    async with await page_client(*items) as c:
        page = (await c.get("/")).text
        queue = (await c.get("/api/v1/queue", params={"tier": "critical"})).json()
        metrics = (await c.get("/metrics")).text
    assert "DRA claims not there" in page
    assert "e2e-dra/no-claim" in page and "ResourceClaim absent-gpus does not exist" in page
    # Whatever the filters: it is in no tier, its GPUs being unknown.
    assert [(p["pod"], p["reason"]) for p in queue["dra_problems"]] == [("no-claim", "claim_missing")]
    assert 'watchtower_dra_unresolved_pods{reason="claim_missing"} 1.0' in metrics
    assert 'watchtower_dra_unresolved_pods{reason="template_missing"} 0.0' in metrics
