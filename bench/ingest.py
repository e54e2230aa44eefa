"""Ingest a large pod LIST through the Kubernetes adapter into the domain state, against references.

A separate process serves N synthetic, realistic pods (~5 KB each, see _podgen.py) as JSON pages of 500
over loopback. Measured in this run:

  adapter   KubeSource paged LIST (official client, raw bytes) → compacted items → Ingestor.replace → state
  orjson    orjson.loads of the same page bytes (fetched again; loads time only) — the reference
  models    the official client's ApiClient.deserialize into V1PodList on the first 5,000 pods,
            extrapolated to N (it would take minutes on all of them)
  memory    peak RSS of this process during the adapter run; retained bytes per tracked pod as the RSS
            growth from before the run to after it (state kept, everything else released)

    .venv/bin/python bench/ingest.py [--pods 150000]

Targets (DESIGN §8): adapter ≤ 0.25 × orjson; ≤ 1 KB retained per pod; peak ≤ 512 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
import time
from pathlib import Path

import orjson
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import peak_rss_bytes, pod_server, rss_bytes

from watchtower.adapters.kube import KubeSource, Resource
from watchtower.adapters.kube_decode import ObjectDecoder
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor

PODS = Resource("Pod", "/api/v1/pods")
MODEL_SUBSET = 5000


async def through_adapter(kubeconfig: Path, page: int) -> tuple[float, ClusterState, Ingestor]:
    decoder = ObjectDecoder(keep_annotations=frozenset({"watchtower.io/note"}))
    state = ClusterState()
    ingestor = Ingestor(state, decoder)
    source = KubeSource.connect(
        kubeconfig=str(kubeconfig), context=None, decoder=decoder, page_size=page, resources=(PODS,)
    )
    done = asyncio.Event()

    def on_list(kind: str, items: list) -> None:  # type: ignore[type-arg]
        ingestor.replace(kind, items)
        done.set()

    t0 = time.perf_counter()
    task = asyncio.create_task(source.run(on_list=on_list, on_change=lambda *a: None))
    await done.wait()
    elapsed = time.perf_counter() - t0
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    source.transport.close()
    return elapsed, state, ingestor


def fetch_pages(url: str, page: int):  # type: ignore[no-untyped-def]
    """Yield the raw LIST pages one at a time, as the adapter received them."""
    http = urllib3.PoolManager()
    cont = ""
    while True:
        q = f"limit={page}" + (f"&continue={cont}" if cont else "")
        data = http.request("GET", f"{url}/api/v1/pods?{q}").data
        yield data
        cont = orjson.loads(data[: data.index(b'"items"')] + b'"items":[]}')["metadata"].get("continue", "")
        if not cont:
            return


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--page", type=int, default=500)
    a = ap.parse_args()
    with pod_server(pods=a.pods, page=a.page) as (url, kubeconfig):
        gc.collect()
        rss0 = rss_bytes()
        took, state, ingestor = asyncio.run(through_adapter(kubeconfig, a.page))
        peak = peak_rss_bytes()
        gc.collect()
        retained = rss_bytes() - rss0
        assert len(state.pods) == a.pods, (len(state.pods), dict(ingestor.skipped))

        loads = 0.0
        wire = 0
        subset: list[bytes] = []
        for data in fetch_pages(url, a.page):
            wire += len(data)
            t = time.perf_counter()
            orjson.loads(data)
            loads += time.perf_counter() - t
            if len(subset) * a.page < MODEL_SUBSET:
                subset.append(data)

    from kubernetes.client import ApiClient

    api = ApiClient()
    t = time.perf_counter()
    n_models = 0
    for data in subset:
        n_models += len(api.deserialize(data.decode(), "V1PodList", "application/json").items)
    models = (time.perf_counter() - t) * a.pods / n_models

    n = a.pods
    print(f"pods {n:,}  wire {wire / 1e6:,.0f} MB ({wire / n:,.0f} B/pod), pages of {a.page}")
    print(f"adapter LIST → state       {took:7.2f} s  ({took / n * 1e6:5.1f} µs/pod, HTTP included)")
    print(f"orjson.loads same bytes    {loads:7.2f} s  (reference, loads only)")
    print(f"official client models     {models:7.2f} s  (extrapolated from {n_models:,} pods)")
    print(f"ratio adapter / orjson     {took / loads:7.3f}   (target ≤ 0.25)")
    print(f"ratio models / adapter     {models / took:7.1f}x")
    print(f"peak RSS during the list   {peak / 2**20:7.0f} MB  (target ≤ 512)")
    print(f"retained per tracked pod   {retained / n:7.0f} B   (RSS growth / pods; target ≤ 1024)")


if __name__ == "__main__":
    main()
