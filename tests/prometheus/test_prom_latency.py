"""Prometheus answering in 20 s, not failing: the real Prometheus behind the fault proxy
(tests/faults/proxy.py), which holds every answer 20 s. The service built by the composition root ticks
on; each tick and /healthz stay prompt, the GPU view says its figures are stale (and why), and they are
fresh again once Prometheus is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest

from tests.faults.proxy import FaultProxy
from tests.fixtures.scenario import ManualClock, ReplaySource, demo_cluster, list_everything
from tests.prometheus.prom_exposition import Device, KsmPod, dcgm_text, ksm_text
from tests.prometheus.prom_server import HTTPServer, PrometheusProcess, metrics_route
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container
from watchtower.config.loading import settings_from_mapping
from watchtower.runtime.tick_loop import GPU_READ_WAIT, TickLoop

T = TypeVar("T")
LATENCY = 20.0
TIMEOUT = 2.0


@pytest.fixture
def exporter() -> Iterator[HTTPServer]:
    devices = [Device(0, "n1", pod="idle-0", namespace="ml", util=1.0)]
    pods = [KsmPod("ml", "idle-0", 1, owner_name="idle-job")]
    server = HTTPServer(
        {
            "/dcgm": metrics_route(lambda: dcgm_text(devices)),
            "/ksm": metrics_route(lambda: ksm_text(pods, {"ml": None})),
        }
    ).start()
    yield server
    server.stop()


def _config(target: str) -> str:
    host = target.removeprefix("http://")
    return (
        "global:\n  scrape_interval: 1s\nscrape_configs:\n"
        "  - job_name: kube-state-metrics\n    honor_labels: true\n    metrics_path: /ksm\n"
        f"    static_configs: [{{targets: ['{host}']}}]\n"
        f"  - job_name: dcgm\n    metrics_path: /dcgm\n    static_configs: [{{targets: ['{host}']}}]\n"
    )


async def _timed(work: Awaitable[T]) -> tuple[float, T]:
    t0 = time.monotonic()
    out = await work
    return time.monotonic() - t0, out


async def test_prometheus_answering_in_20s_leaves_the_tick_prompt_and_the_gpu_view_says_it_is_late(
    tmp_path: Any, exporter: HTTPServer, real_prometheus: None
) -> None:
    prom = PrometheusProcess(config=_config(exporter.url), data_dir=tmp_path / "data")
    prom.start()
    proxy = FaultProxy(int(urlsplit(prom.url).port or 80)).start()
    try:
        settings = settings_from_mapping(
            {
                "prometheus": {
                    "url": f"http://127.0.0.1:{proxy.port}",
                    "timeout": f"{TIMEOUT:g}s",
                    "retries": 1,
                    "backoff": "0.1s",
                    "scrape_interval": "1s",
                    "query_every": "1s",
                    "query_step": "1s",
                }
            },
            env={},
        )
        cluster = demo_cluster()
        source = ReplaySource(cluster)
        c = build_container(
            settings, clock=ManualClock(), source_health=source.feed_health, source_name="replay"
        )
        assert c.gpu is not None
        list_everything(c.queue_tracker, cluster)
        source.listed = set(cluster.objects)
        loop = TickLoop(c)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(c)), base_url="http://watchtower.test"
        ) as http:

            async def gpu_view() -> dict[str, Any]:
                r = await http.get("/api/v1/gpu/idle")
                assert r.status_code == 200, r.text
                return dict(r.json())

            deadline = time.monotonic() + 60
            while not ((v := await gpu_view())["available"] and not v["stale"]):
                assert time.monotonic() < deadline, f"no fresh GPU figures within 60 s: {v}"
                await loop.tick()
                await asyncio.sleep(0.5)
            plain, _ = await _timed(loop.tick())

            proxy.latency(LATENCY)  # every answer from Prometheus now comes 20 s late
            ticks, healths = [], []
            stale_after = None
            started = time.monotonic()
            while time.monotonic() - started < 2 * TIMEOUT + 4:
                took, _ = await _timed(loop.tick())
                ticks.append(took)
                took, r = await _timed(http.get("/healthz"))
                assert r.status_code == 200
                healths.append(took)
                v = await gpu_view()
                if v["stale"] and stale_after is None:
                    stale_after = time.monotonic() - started
                await asyncio.sleep(0.5)
            print(
                f"\nPrometheus 20 s late: ticks {min(ticks):.3f}-{max(ticks):.3f} s (before: {plain:.3f} s),"
                f" /healthz up to {max(healths) * 1000:.0f} ms, figures marked stale after {stale_after} s"
            )
            # The tick that starts a read waits for it GPU_READ_WAIT at most; the ones after, not at all.
            assert max(ticks) <= GPU_READ_WAIT + plain + 0.5, ticks
            assert sorted(ticks)[len(ticks) // 2] <= plain + 0.5, ticks
            assert max(healths) < 0.5, healths
            assert stale_after is not None, "the GPU view never said its figures were late"
            # Two attempts of TIMEOUT each, the backoff between, and the half-second steps of this loop.
            assert stale_after <= 2 * TIMEOUT + 3, stale_after
            assert v["stale"] and v["available"], v  # the last figures, kept and called stale
            assert f"no answer within {TIMEOUT:g}s" in (v["prometheus"]["last_error"] or ""), v

            proxy.heal()
            deadline = time.monotonic() + 30 + LATENCY
            while (v := await gpu_view())["stale"]:
                assert time.monotonic() < deadline, f"still stale after healing: {v}"
                await loop.tick()
                await asyncio.sleep(0.5)
    finally:
        proxy.stop()
        prom.stop()
