"""Pod watch events per second through the Kubernetes adapter into the domain state, against a reference.

A separate process serves one watch stream of N pod events (ADDED for 2,000 realistic ~5 KB pods, then
MODIFIED for them), one HTTP chunk per event as the API server sends them, over loopback. Measured:

  adapter    KubeSource watch (official client, reader thread, line split, msgspec) → Ingestor.apply → state
  reference  the same bytes, already in memory: split into lines + orjson.loads of each line

    .venv/bin/python bench/watch.py [--events 50000]

Target (DESIGN §8): ≥ 5,000 pod events/s on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import pod_server
from _podgen import watch_lines

from watchtower.adapters.kube import KubeSource, Resource
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor

PODS = Resource("Pod", "/api/v1/pods")


async def through_adapter(kubeconfig: Path, events: int) -> tuple[float, Ingestor]:
    decoder = ObjectDecoder()
    ingestor = Ingestor(ClusterState(), decoder)
    source = KubeSource.connect(kubeconfig=str(kubeconfig), context=None, decoder=decoder, resources=(PODS,))
    seen = 0
    first = 0.0
    done = asyncio.Event()

    def on_change(kind: str, typ: str, raw: object) -> None:
        nonlocal seen, first
        if seen == 0:
            first = time.perf_counter()
        ingestor.apply(kind, typ, raw)  # type: ignore[arg-type]
        seen += 1
        if seen == events:
            done.set()

    task = asyncio.create_task(source.run(on_list=ingestor.list_page, on_change=on_change))
    await done.wait()
    elapsed = time.perf_counter() - first
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    source.transport.close()
    return elapsed, ingestor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=50_000)
    a = ap.parse_args()
    with pod_server(watch_events=a.events) as (_, kubeconfig):
        took, ingestor = asyncio.run(through_adapter(kubeconfig, a.events))
    assert len(ingestor.state.pods) == min(a.events, 2000) and not ingestor.skipped

    stream = b"\n".join(watch_lines(a.events)) + b"\n"
    t = time.perf_counter()
    for line in stream.split(b"\n"):
        if line:
            orjson.loads(line)
    ref = time.perf_counter() - t

    n = a.events
    print(f"events {n:,}  ({len(stream) / n:,.0f} B/event)")
    print(f"adapter watch → state      {n / took:9,.0f} events/s  ({took:.2f} s; first to last event)")
    print(f"split + orjson.loads       {n / ref:9,.0f} events/s  (reference, bytes in memory)")
    print(f"ratio adapter / reference  {(n / took) / (n / ref):9.2f}")
    print("target ≥ 5,000 events/s")


if __name__ == "__main__":
    main()
