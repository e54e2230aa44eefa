"""The simulator as a ClusterSource: LIST every kind, then stream changes on its own clock until cancelled."""

import asyncio

import httpx

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator.cluster import KINDS


async def test_run_lists_every_kind_then_streams_changes_until_cancelled():
    sim = demo_cluster(SimulatorConfig(seed=9, speed=600), tick=0.05)
    start = sim.now()
    state = ClusterState()
    ingest = Ingestor(state, ObjectDecoder())
    listed: list[str] = []
    changes: list[tuple[str, str]] = []
    got_changes = asyncio.Event()

    def on_list(kind, raws):
        listed.append(kind)
        ingest.list_page(kind, raws)

    def on_change(kind, type_, raw):
        changes.append((kind, type_))
        ingest.apply(kind, type_, raw)
        if len(changes) >= 20:
            got_changes.set()

    task = asyncio.create_task(sim.run(on_list=on_list, on_change=on_change))
    try:
        await asyncio.wait_for(got_changes.wait(), timeout=60)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert listed == list(KINDS)
    assert sim.now() > start
    assert sum(ingest.skipped.values()) == 0
    assert len(state.nodes) == 12 and len(state.priority_classes) == 6  # DESIGN §4's five and `sweep`
    assert sim.health()["healthy"] is True
    assert state.pods.keys() == sim.pods.keys()


async def test_run_serves_metrics_when_a_port_is_configured_and_stops_serving_when_cancelled():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sim = demo_cluster(SimulatorConfig(seed=9, metrics_port=port), tick=0.05)
    listed = asyncio.Event()
    task = asyncio.create_task(sim.run(on_list=lambda k, r: listed.set(), on_change=lambda *a: None))
    try:
        await asyncio.wait_for(listed.wait(), timeout=30)
        async with httpx.AsyncClient() as client:
            for _ in range(100):
                try:
                    r = await client.get(f"http://127.0.0.1:{port}/metrics")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            assert r.status_code == 200 and "kube_pod_info{" in r.text
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    async with httpx.AsyncClient() as client:
        try:
            await client.get(f"http://127.0.0.1:{port}/metrics")
            served_after = True
        except httpx.ConnectError:
            served_after = False
    assert not served_after
