"""Health, reconnection and configuration of the Kubernetes adapter, against the local list/watch server.

The stand-in server is tests/unit/adapters/kube/fake_apiserver.py (a real kube-apiserver comes with issue 6). Time in
health reports comes from a manual clock, so staleness figures are exact.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.unit.adapters.kube.conftest import PODS, SERVED, ManualClock, running, until
from tests.unit.adapters.kube.fake_apiserver import FakeApiServer, write_kubeconfig
from watchtower.adapters.kube import RESOURCES, KubeSource, Resource
from watchtower.adapters.kube.backoff import Backoff
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.kube.lines import LineSplitter
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.domain.kinds import PADDLE_JOB
from watchtower.simulator import objects as o

PADDLE = "/apis/batch.paddlepaddle.org/v1/paddlejobs"
# PaddleJobs are watched (a quota-refused one is read from its template), but their CRD is optional.
WITH_PADDLE = RESOURCES


def all_connected(source: KubeSource) -> bool:
    """Every served kind is watched and every optional one found absent (the fixture serves no CRD)."""
    return all(
        source.kind_health(r.kind).connected if not r.optional else not source.kind_health(r.kind).present
        for r in source.resources
    )


async def test_health_reports_staleness_and_failures_while_the_server_errs_then_recovers(
    apiserver: FakeApiServer, tmp_path: Path
) -> None:
    clock = ManualClock()
    apiserver.put(PODS, o.pod(name="a", namespace="n", created=clock.t, uid="u1"))
    async with running(apiserver, tmp_path, clock=clock, resources=WITH_PADDLE) as r:
        await until(lambda: all_connected(r.source), "every kind watched")
        h = r.source.health()
        assert h["healthy"] is True and h["stale_seconds"] == 0.0
        assert h["kinds"]["PaddleJob"]["present"] is False  # type: ignore[index]

        apiserver.fail(PODS, 10_000)
        apiserver.close_watches(PODS)
        pods = r.source.kind_health("Pod")
        await until(lambda: pods.consecutive_failures >= 3, "several failed reconnects")
        clock.t += 300
        h = r.source.health()
        assert h["healthy"] is False
        assert h["stale_seconds"] >= 300
        assert "500" in h["kinds"]["Pod"]["last_error"]  # type: ignore[index]
        assert h["kinds"]["Node"]["stale_seconds"] == 0.0  # type: ignore[index]

        apiserver.fail(PODS, 0)
        await until(lambda: pods.connected, "watching again")
        h = r.source.health()
        assert h["healthy"] is True and h["stale_seconds"] == 0.0
        assert pods.consecutive_failures == 0 and pods.watch_restarts >= 1 and pods.relists == 0


async def test_missing_paddlejob_crd_is_skipped_quietly(apiserver: FakeApiServer, tmp_path: Path) -> None:
    async with running(apiserver, tmp_path, resources=WITH_PADDLE) as r:
        await until(lambda: all_connected(r.source), "every kind watched")
        pj = r.source.kind_health("PaddleJob")
        assert (pj.present, pj.consecutive_failures, pj.last_error) == (False, 0, "")
        assert [p for _, p, _ in apiserver.requests].count(PADDLE) == 1
        assert "PaddleJob" not in [k for k, _ in r.lists]


async def test_paddlejobs_are_watched_by_default_and_an_absent_crd_is_no_error(
    apiserver: FakeApiServer, tmp_path: Path
) -> None:
    assert Resource.of(PADDLE_JOB) in RESOURCES
    async with running(apiserver, tmp_path) as r:
        await until(lambda: all_connected(r.source), "every kind watched")
        assert PADDLE in [p for _, p, _ in apiserver.requests]
        assert r.source.health()["kinds"]["PaddleJob"]["present"] is False  # type: ignore[index]
        assert r.source.health()["healthy"] is True


async def test_paddlejobs_are_listed_and_watched_when_the_crd_exists(tmp_path: Path) -> None:
    server = FakeApiServer([*SERVED, PADDLE]).start()
    try:
        job = {
            "apiVersion": "batch.paddlepaddle.org/v1",
            "kind": "PaddleJob",
            "metadata": {"name": "j", "namespace": "n", "uid": "pj1"},
        }
        server.put(PADDLE, job)
        async with running(server, tmp_path, resources=WITH_PADDLE) as r:
            await until(lambda: r.source.kind_health("PaddleJob").connected, "paddlejobs watched")
            assert ("PaddleJob", 1) in r.lists
    finally:
        server.stop()


async def test_kubeconfig_context_chooses_the_cluster(tmp_path: Path) -> None:
    first, second = FakeApiServer(SERVED).start(), FakeApiServer(SERVED).start()
    try:
        second.put(PODS, o.pod(name="only-here", namespace="n", created=1.0e9, uid="u2"))
        a = yaml.safe_load(first.write_kubeconfig(tmp_path / "a", context="first").read_text())
        b = yaml.safe_load(second.write_kubeconfig(tmp_path / "b", context="second").read_text())
        for key in ("clusters", "users", "contexts"):
            a[key] += b[key]
        cfg = tmp_path / "kubeconfig"
        cfg.write_text(yaml.safe_dump(a))  # current-context stays "first"
        decoder = ObjectDecoder()
        source = KubeSource.connect(kubeconfig=str(cfg), context="second", decoder=decoder)
        seen: list[tuple[str, int]] = []
        task = asyncio.create_task(
            source.run(on_list=lambda k, items, **_: seen.append((k, len(items))), on_change=lambda *a: None)
        )
        await until(lambda: ("Pod", 1) in seen, "pods listed from the second cluster")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert first.requests == []
        assert second.authorizations == {"Bearer test-token"}
    finally:
        first.stop()
        second.stop()


async def test_cancelling_run_stops_every_reader_thread(apiserver: FakeApiServer, tmp_path: Path) -> None:
    async with running(apiserver, tmp_path) as r:
        await until(lambda: all_connected(r.source), "every kind watched")
        assert any(t.name == "watch-reader" for t in threading.enumerate())
    await until(
        lambda: not any(t.name == "watch-reader" for t in threading.enumerate()), "reader threads gone"
    )


def test_backoff_grows_to_the_cap_with_jitter_and_resets() -> None:
    b = Backoff(base=1.0, cap=8.0, rng=random.Random(1))
    delays = [b.next() for _ in range(6)]
    steps = [1, 2, 4, 8, 8, 8]
    assert all(s / 2 <= d <= s for d, s in zip(delays, steps, strict=True))
    assert len({round(d, 6) for d in delays[3:]}) == 3  # jittered, not in step
    b.reset()
    assert b.next() <= 1.0


def test_line_splitter_joins_lines_split_across_chunks_and_keeps_the_truncated_tail() -> None:
    s = LineSplitter()
    assert s.feed(b'{"a":') == []
    assert s.feed(b'1}\n{"b":2}\n\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert s.rest() == b'{"c"'
    assert s.rest() == b""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kube_records(caplog: pytest.LogCaptureFixture, level: int) -> dict[str, list[str]]:
    """The adapter's log lines at `level`, by the kind they start with."""
    out: dict[str, list[str]] = {}
    for rec in caplog.records:
        if rec.name == "watchtower.adapters.kube.source" and rec.levelno == level:
            msg = rec.getMessage()
            out.setdefault(msg.split(":", 1)[0], []).append(msg)
    return out


async def readyz(source: KubeSource, clock: ManualClock) -> dict[str, Any]:
    container = build_container(
        Settings(), clock=clock, source_health=source.feed_health, source_name="kube", decoder=source.decoder
    )
    transport = httpx.ASGITransport(app=create_app(container))
    async with httpx.AsyncClient(transport=transport, base_url="http://watchtower.test") as c:
        r = await c.get("/readyz")
    body: dict[str, Any] = r.json()
    return body


async def test_an_unreachable_api_server_is_one_line_per_kind_down_one_up_and_the_backoff_in_readyz(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    clock = ManualClock()
    port = free_port()
    # Nothing listens on the port yet: every attempt of every kind is refused.
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
    source = KubeSource.connect(
        kubeconfig=str(kubeconfig),
        context=None,
        decoder=ObjectDecoder(),
        clock=clock,
        backoff_base=0.02,
        backoff_cap=0.1,
    )
    kinds = [r.kind for r in source.resources]
    task = asyncio.create_task(source.run(on_list=lambda *a, **k: None, on_change=lambda *a: None))
    server: FakeApiServer | None = None
    try:
        failing = lambda: all(source.kind_health(k).consecutive_failures >= 5 for k in kinds)  # noqa: E731
        await until(failing, "every kind refused five times")
        assert not [r for r in caplog.records if r.name.startswith("urllib3")]
        down = kube_records(caplog, logging.WARNING)
        assert sorted(down) == sorted(kinds) and all(len(v) == 1 for v in down.values()), down
        assert "Connection refused" in down["Pod"][0] and "retrying with back-off" in down["Pod"][0]

        body = await readyz(source, clock)
        pod = body["kinds"]["Pod"]["source"]
        assert pod["consecutive_failures"] >= 5
        assert 0 <= pod["next_retry_in_seconds"] <= 0.1
        assert "Connection refused" in pod["last_error"]
        assert pod["down_since"] == clock.t
        assert body["ready"] is False

        clock.t += 45
        server = FakeApiServer(SERVED, port=port).start()

        # An optional CRD the server lacks (PaddleJob here) is not watched: it is known absent again.
        def back() -> bool:
            return all(source.kind_health(k).connected or not source.kind_health(k).present for k in kinds)

        await until(back, "every kind watched again")
        up = kube_records(caplog, logging.INFO)
        assert sorted(up) == sorted(kinds) and all(len(v) == 1 for v in up.values()), up
        assert "reachable again after 45s down" in up["Pod"][0]
        assert all(len(v) == 1 for v in kube_records(caplog, logging.WARNING).values())

        pod = (await readyz(source, clock))["kinds"]["Pod"]["source"]
        assert (pod["consecutive_failures"], pod["next_retry_in_seconds"], pod["down_since"]) == (
            0,
            None,
            None,
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        source.transport.close()
        if server is not None:
            server.stop()


def test_source_health_says_since_when_and_why_the_cluster_is_unreachable(tmp_path: Path) -> None:
    clock = ManualClock()
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    source = KubeSource.connect(
        kubeconfig=str(kubeconfig), context=None, decoder=ObjectDecoder(), clock=clock
    )
    assert (source.feed_health().down_since, source.feed_health().last_error) == (None, "")
    source.kind_health("Pod").failed(clock.t - 60, "NewConnectionError: refused", retry_in=1.0)
    source.kind_health("Node").failed(clock.t - 10, "HTTP 500 InternalError", retry_in=1.0)
    h = source.feed_health()
    assert (h.healthy, h.down_since, h.last_error) == (False, clock.t - 60, "HTTP 500 InternalError")
    source.transport.close()
