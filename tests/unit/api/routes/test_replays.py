"""Policy replays through the service: `POST /api/v1/replays` needs the token, is checked at once (size,
policies), runs in the worker pool, and its result at `/api/v1/replays/{id}` is the document the command
prints for the same input; `/replays/{id}` is its page."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.unit.api.conftest import TOKEN, make_service
from tests.unit.commands.test_replay_cli import NO_PREEMPTION, PREEMPTION, TRACE
from watchtower.api.app import create_app
from watchtower.config.model import ReplayConfig
from watchtower.services.replay_jobs import ReplayJobs

AUTH = {"authorization": f"Bearer {TOKEN}"}
BODY = {"trace": TRACE, "policies": [NO_PREEMPTION, "name: preempting\n" + PREEMPTION]}


@pytest.fixture
async def service_and_client() -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    svc = make_service()
    jobs = ReplayJobs(ReplayConfig(max_rows=50, max_policies=3))
    container = dataclasses.replace(svc.container, replays=jobs)
    app = create_app(container)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://watchtower.test"
    ) as c:
        yield svc, c
    jobs.close()


async def finished(c: httpx.AsyncClient, replay_id: str) -> dict[str, Any]:
    for _ in range(600):
        r = await c.get(f"/api/v1/replays/{replay_id}")
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] not in ("queued", "running"):
            return body
        await asyncio.sleep(0.1)
    raise AssertionError("the replay did not finish in 60 s")


async def test_without_the_token_a_replay_is_refused_with_401(service_and_client):
    _, c = service_and_client
    assert (await c.post("/api/v1/replays", json=BODY)).status_code == 401
    r = await c.post("/api/v1/replays", json=BODY, headers={"authorization": "Bearer wrong"})
    assert r.status_code == 401


async def test_a_replay_completes_and_its_result_is_the_command_s_json(service_and_client, tmp_path: Path):
    _, c = service_and_client
    r = await c.post("/api/v1/replays", json=BODY, headers=AUTH)
    assert r.status_code == 202, r.text
    queued = r.json()
    assert queued["status"] in ("queued", "running") and queued["rows"] == 5
    assert queued["policies"] == ["tiers only", "preempting"]
    assert r.headers["location"] == f"/api/v1/replays/{queued['id']}"
    body = await finished(c, queued["id"])
    assert body["status"] == "done", body

    trace, a, b = tmp_path / "week.csv", tmp_path / "a.yaml", tmp_path / "b.yaml"
    trace.write_text(BODY["trace"])
    a.write_text(BODY["policies"][0])
    b.write_text(BODY["policies"][1])
    cli = subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "replay", "--trace", trace, "--policy", a, "--policy", b]
        + ["--format", "json"],
        capture_output=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr.decode()
    assert body["result"] == json.loads(cli.stdout)

    page = await c.get(f"/replays/{queued['id']}")
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    for run in ("observed", "tiers only", "preempting"):
        assert f"<td>{run}" in page.text


async def test_a_wrong_policy_key_is_refused_at_once_with_422_naming_it(service_and_client):
    _, c = service_and_client
    body = {"trace": TRACE, "policies": ["nodes: {count: 1, gpus: 8}\npreemptoin: {}\n"]}
    r = await c.post("/api/v1/replays", json=body, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["detail"]["problems"] == ["preemptoin: Extra inputs are not permitted"]


async def test_a_trace_over_the_row_limit_is_refused_with_413_and_the_estimate(service_and_client):
    _, c = service_and_client
    rows = "".join(f"j{i},nlp,low,0,10m,1,1\n" for i in range(60))
    body = {
        "trace": "id,team,tier,submitted,duration,pods,gpus_per_pod\n" + rows,
        "policies": [NO_PREEMPTION],
    }
    r = await c.post("/api/v1/replays", json=body, headers=AUTH)
    assert r.status_code == 413
    detail = r.json()["detail"]
    assert detail["rows"] == 60 and detail["max_rows"] == 50
    assert detail["estimated_seconds"] >= 0 and "replay.max_rows" in detail["error"]


async def test_a_bad_trace_row_fails_the_replay_naming_the_row(service_and_client):
    _, c = service_and_client
    body = {"trace": TRACE.replace("nlp,medium", "nlp,urgent"), "policies": [NO_PREEMPTION]}
    r = await c.post("/api/v1/replays", json=body, headers=AUTH)
    assert r.status_code == 202, r.text
    done = await finished(c, r.json()["id"])
    assert done["status"] == "failed"
    assert done["problems"] == [
        "line 5, column tier: unknown tier 'urgent' (tiers: critical, high, medium, low)"
    ]
    page = await c.get(f"/replays/{r.json()['id']}")
    assert page.status_code == 422 and "unknown tier" in page.text


async def test_a_body_that_is_no_replay_request_and_an_unknown_id_are_answered_in_words(service_and_client):
    _, c = service_and_client
    r = await c.post("/api/v1/replays", json={"trace": TRACE}, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["detail"]["problems"][0].startswith("policies:")
    assert (await c.get("/api/v1/replays/nothing")).status_code == 404
    assert (await c.get("/replays/nothing")).status_code == 404


def test_no_more_than_the_configured_replays_run_at_once():
    from concurrent.futures import ThreadPoolExecutor

    sizes: list[int] = []

    def pool(workers: int) -> ThreadPoolExecutor:
        sizes.append(workers)
        return ThreadPoolExecutor(max_workers=workers)

    jobs = ReplayJobs(ReplayConfig(workers=2), pool=pool)
    try:
        entries = [jobs.submit(TRACE, [NO_PREEMPTION]) for _ in range(3)]
        for e in entries:
            e.future.result(timeout=60)
        assert sizes == [2]  # one pool, started on the first request, of the configured size
        assert all(e.status() == "done" for e in entries)
    finally:
        jobs.close()


async def test_a_body_far_beyond_the_row_limit_is_refused_before_it_is_read(service_and_client):
    _, c = service_and_client
    body = {"trace": "x" * (50 * 1024 + 1), "policies": [NO_PREEMPTION]}
    r = await c.post("/api/v1/replays", json=body, headers=AUTH)
    assert r.status_code == 413
    assert r.json()["detail"]["max_rows"] == 50 and "bytes" in r.json()["detail"]
