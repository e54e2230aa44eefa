"""Does the service's memory grow with the soak's churn? The soak's work in one process, without HTTP load.

Builds the service's container as commands.run.run_service does (SQLite alert store and fairness history in
a temporary directory, alerting to a webhook that is never called), lists bench/_podgen.py's realistic
pods into the queue tracker, then loops as bench/soak.py drives the service: each tick of `evaluate_every`
(0.5 s of a clock of its own) takes rate × 0.5 pod MODIFIED events, each giving a random pod a new
`watchtower.io/note`; every 2 s a probe pod in `soak-probe` is added or deleted; every 30 s a new
namespace `soak-alert-K` gets a critical pod pending an hour; then the service's tick runs (TickLoop.tick:
evaluate, prune, alerting, the documents' prebuild, the fairness recorder) and the API is asked, in
process, for /api/v1/queue, /api/v1/queue?namespace=soak-probe and /metrics.

After `--warm` events tracemalloc starts; a first snapshot is taken after another `--warm` events, the
second after `--events` more. Printed: the allocation sites that grew most between the two (bytes per
100,000 events), the object types whose counts grew, and every container reachable from the container's
attributes whose len() grew.

    .venv/bin/python bench/growth.py [--pods 10000] [--events 300000] [--warm 50000] [--rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import os
import random
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import _podgen  # noqa: E402
from _harness import rss_bytes  # noqa: E402
from soak import NODES, PROBE_NS, _probe_pod  # noqa: E402

from watchtower.adapters.process_runtime import limit_malloc_arenas  # noqa: E402
from watchtower.api.app import create_app  # noqa: E402
from watchtower.bootstrap import build_container, fairness_recorder, open_alert_store, open_history  # noqa: E402
from watchtower.config.loading import settings_from_mapping  # noqa: E402
from watchtower.domain.health import HEALTHY  # noqa: E402
from watchtower.runtime.tick_loop import TickLoop  # noqa: E402
from watchtower.services.ingest import KINDS  # noqa: E402
from watchtower.simulator import objects as o  # noqa: E402


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at


def containers(root: object, depth: int = 6) -> dict[str, int]:
    """Return path → len() of every dict, list, set, deque or tuple reachable from `root` through object
    attributes (not through container elements, but through small containers' values)."""
    out: dict[str, int] = {}
    seen: set[int] = set()

    def attrs(x: object) -> Iterator[tuple[str, object]]:
        d = getattr(x, "__dict__", None)
        if isinstance(d, dict):
            yield from d.items()
        for cls in type(x).__mro__:
            for s in getattr(cls, "__slots__", ()):
                if hasattr(x, s):
                    yield s, getattr(x, s)
        for f in getattr(type(x), "__struct_fields__", ()):
            yield f, getattr(x, f, None)

    def walk(x: object, path: str, left: int) -> None:
        if id(x) in seen or left < 0 or isinstance(x, str | bytes | int | float | type) or callable(x):
            if not (callable(x) and hasattr(x, "__self__")):
                return
            x = x.__self__  # a bound method: its object
        if id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, dict | list | set | frozenset | tuple) or hasattr(x, "maxlen"):
            n = len(x)  # type: ignore[arg-type]
            out[path] = n
            if n <= 64:
                items = x.items() if isinstance(x, dict) else enumerate(x)  # type: ignore[arg-type]
                for k, v in list(items)[:64]:
                    walk(v, f"{path}[{k!r:.30}]", left - 1)
            return
        if type(x).__module__.startswith(("watchtower", "prometheus_client", "_")) or hasattr(x, "__dict__"):
            for name, v in attrs(x):
                walk(v, f"{path}.{name}", left - 1)

    walk(root, "c", depth)
    return out


def top_sites(a: tracemalloc.Snapshot, b: tracemalloc.Snapshot, per: float, top: int, frames: int) -> None:
    # Not what this harness keeps itself (the lengths it walked at A, its events' bytes).
    filt = [
        tracemalloc.Filter(False, __file__),
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    ]
    stats = b.filter_traces(filt).compare_to(a.filter_traces(filt), "traceback")
    print(f"\nallocation sites that grew most (KiB per 100,000 events, blocks), top {top}:")
    for st in sorted((st for st in stats if st.size_diff > 0), key=lambda st: -st.size_diff)[:top]:
        print(f"  {st.size_diff * per / 1024:+9.1f} KiB  {st.count_diff * per:+9.0f} blocks")
        for fr in list(st.traceback)[-frames:]:
            print(f"        {fr.filename.replace(str(HERE.parent) + '/', '')}:{fr.lineno}")


def trimmed_rss() -> int:
    """Return the RSS after glibc's malloc_trim(0) hands back the free memory it holds (the RSS as is
    where there is no glibc): what is left is live memory and fragments that cannot be returned."""
    name = ctypes.util.find_library("c")
    if name is not None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(name).malloc_trim(0)
    return rss_bytes()


def kinds_count() -> Counter[str]:
    return Counter(type(x).__qualname__ for x in gc.get_objects())


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=500.0, help="pod events per second of the clock")
    ap.add_argument("--every", type=float, default=0.5, help="queue.evaluate_every (s)")
    ap.add_argument("--warm", type=int, default=50_000, help="events before tracing, and again before A")
    ap.add_argument("--events", type=int, default=300_000, help="events between snapshots A and B")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument(
        "--path",
        action="append",
        help="what the API is asked each tick (repeatable; default: the soak's three)",
    )
    ap.add_argument(
        "--no-trace", action="store_true", help="no tracemalloc (10x faster): counts and lengths only"
    )
    ap.add_argument(
        "--no-trim", action="store_true", help="no malloc_trim at A and B: RSS as the soak sees it"
    )
    a = ap.parse_args()
    limit_malloc_arenas()  # as run_service does, before any thread

    tmp = Path(tempfile.mkdtemp(prefix="watchtower-growth-"))
    t0 = time.time()
    clock = Clock(t0)
    (tmp / "secret").write_text("whsec_" + "c29hay1iZW5jaG1hcmstc2VjcmV0LTAxMjM0NTY3ODk=")
    settings = settings_from_mapping(
        {
            "cluster": {"source": "kube"},
            "queue": {"evaluate_every": f"{a.every}s"},
            "store": {"path": str(tmp / "watchtower.db")},
            "alerting": {
                "route": {
                    "receiver": "hook",
                    "group_by": ["alertname", "namespace"],
                    "group_wait": "2s",
                    "group_interval": "5m",
                    "repeat_interval": "12h",
                },
                "receivers": [
                    {
                        "name": "hook",
                        "webhooks": [{"url": "http://127.0.0.1:9/hook", "secret_file": str(tmp / "secret")}],
                    }
                ],
            },
        }
    )
    store = open_alert_store(settings)
    history = open_history(settings, store)
    c = build_container(
        settings,
        clock=clock,
        source_health=lambda: HEALTHY,
        source_name="kube",
        alert_store=store,
        history=history,
    )
    w = c.queue_tracker
    _podgen.T0 = t0
    items = _podgen.pod_bytes(a.pods, 1)
    w.on_list(
        "Namespace", [msgspec.Raw(orjson.dumps(o.namespace(f"team-{t}", team=t))) for t in _podgen.TEAMS]
    )
    w.on_list(
        "PriorityClass", [msgspec.Raw(orjson.dumps(o.priority_class(c_, v))) for v, c_ in _podgen.CLASSES]
    )
    w.on_list("Node", [msgspec.Raw(orjson.dumps(o.node(f"gpu-node-{i:04d}"))) for i in range(NODES)])
    for s in range(0, len(items), 500):
        w.on_list(
            "Pod", [msgspec.Raw(b) for b in items[s : s + 500]], first=s == 0, last=s + 500 >= len(items)
        )
    for kind in KINDS:
        if not w.feeds.feeds[kind].listed_at:
            w.on_list(kind, [])
    recorder = fairness_recorder(c)
    loop = TickLoop(c, extra=[recorder.on_tick] if recorder is not None else [])
    app = create_app(c)
    api = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://watchtower")
    rng = random.Random(1)
    note = b'"annotations":{'
    rv = 2000
    sent = 0
    ticks = 0
    per_tick = max(1, round(a.rate * a.every))
    paths = a.path or ["/api/v1/queue", f"/api/v1/queue?namespace={PROBE_NS}", "/metrics"]
    probe_k = 0
    alert_k = 0

    async def run(n_events: int) -> None:
        nonlocal rv, sent, ticks, probe_k, alert_k
        goal = sent + n_events
        while sent < goal:
            for _ in range(per_tick):
                i = rng.randrange(len(items))
                rv += 1
                obj = items[i].replace(b'"resourceVersion":"1"', b'"resourceVersion":"%d"' % rv, 1)
                obj = obj.replace(note, note + b'"watchtower.io/note":"churn %d",' % rv, 1)
                w.on_change("Pod", "MODIFIED", obj)
            sent += per_tick
            ticks += 1
            clock.at += a.every
            if ticks % round(2 / a.every) == 0:  # every 2 s: a probe pod in, or out
                rv += 1
                name = f"probe-{probe_k // 2}"
                typ = "ADDED" if probe_k % 2 == 0 else "DELETED"
                w.on_change("Pod", typ, _probe_pod(name, PROBE_NS, clock.at - 5, critical=False, rv=rv))
                probe_k += 1
            if ticks % round(30 / a.every) == 0:  # every 30 s: a new namespace with a critical pod stuck 1 h
                rv += 1
                ns = f"soak-alert-{alert_k}"
                w.on_change("Pod", "ADDED", _probe_pod("stuck", ns, clock.at - 3600, critical=True, rv=rv))
                alert_k += 1
            await loop.tick()
            if not a.no_http:
                for path in paths:
                    r = await api.get(path)
                    assert r.status_code == 200, (path, r.status_code)

    mib = 1 << 20

    def line(label: str, started: float, trim: bool = False) -> None:
        rss = rss_bytes()
        trimmed = f" (after malloc_trim {trimmed_rss() / mib:7.1f})" if trim else ""
        print(
            f"{label:10} events {sent:>9,}  ticks {ticks:>6,}  alert namespaces {alert_k:>4}  "
            f"RSS {rss / mib:7.1f} MiB{trimmed}  {time.monotonic() - started:6.1f} s  "
            f"load {os.getloadavg()[0]:.2f}",
            flush=True,
        )

    started = time.monotonic()
    line("listed", started)
    points: list[tuple[tracemalloc.Snapshot | None, Counter[str], dict[str, int], int, int]] = []
    # One call site for every phase: tracemalloc's tracebacks would otherwise tell the same allocation
    # made in two phases apart, one growing and one shrinking.
    for phase, n in (("warm", a.warm), ("A", a.warm), ("B", a.events)):
        await run(n)
        if phase == "warm":
            line(phase, started)
            if not a.no_trace:
                tracemalloc.start(a.frames)
            continue
        gc.collect()
        snap = tracemalloc.take_snapshot() if not a.no_trace else None
        points.append((snap, kinds_count(), containers(c), tracemalloc.get_traced_memory()[0], sent))
        line(phase, started, trim=not a.no_trim)
    (snap_a, kinds_a, lens_a, traced_a, sent_a), (snap_b, kinds_b, lens_b, traced_b, _) = points
    per = 100_000 / (sent - sent_a)
    print(
        f"traced memory A {traced_a / mib:.1f} MiB, B {traced_b / mib:.1f} MiB: "
        f"{(traced_b - traced_a) * per / 1024:+.0f} KiB per 100,000 events"
    )
    if snap_a is not None and snap_b is not None:
        top_sites(snap_a, snap_b, per, a.top, a.frames)
    print("\nobject types whose count grew (per 100,000 events):")
    for k, n in sorted(((k, kinds_b[k] - kinds_a.get(k, 0)) for k in kinds_b), key=lambda x: -x[1])[:15]:
        if n > 0:
            print(f"  {n * per:+10.0f}  {k}")
    print("\ncontainers reachable from the container whose len() grew (A → B):")
    grew = [(p, lens_a.get(p, 0), n) for p, n in lens_b.items() if n > lens_a.get(p, 0)]
    for p, before, after in sorted(grew, key=lambda x: -(x[2] - x[1]))[:30]:
        print(f"  {before:>8,} → {after:>8,}  {p}")
    await api.aclose()
    if history is not None:
        history.close()
    if store is not None:
        store.close()


if __name__ == "__main__":
    asyncio.run(main())
