"""Load run of /api/v1/queue with 20,000 pending workloads and 50 concurrent clients (DESIGN §8: p99 ≤ 200 ms).

The service runs in a child process (real uvicorn on 127.0.0.1, a free port) over a state of 20,000 pending
GPU pods; the load comes from `wrk` (Debian package, installed by tests/setup/system-deps.sh) or, without
it, from this process (httpx, asyncio: heavier, so its figures include more client time). Each target gets the same number of requests
at the same concurrency; /healthz, which does no work, is the reference measured in the same run: the gap
between the two is what the queue costs. The child is stopped by its pid.

    .venv/bin/python bench/api_load.py [--pending 20000] [--clients 50] [--seconds 10] [--httpx]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import httpx
import msgspec
import orjson

NOW = 1_800_000_000.0
TIERS = (
    ("urgent-debug", 1_000_000),
    ("online-serving", 900_000),
    ("experiment", 500_000),
    ("batch", 100_000),
)
MESSAGE = (
    "0/400 nodes are available: 12 node(s) had untolerated taint {nvidia.com/gpu: maintenance}, "
    "388 Insufficient nvidia.com/gpu. preemption: 0/400 nodes are available: 12 Preemption is not helpful "
    "for scheduling, 388 No preemption victims found for incoming pod."
)


def serve(pending: int) -> None:
    """Child: build the state, evaluate once, print the port and the build costs, serve until killed."""
    import uvicorn

    from watchtower.api.app import create_app
    from watchtower.bootstrap import build_container
    from watchtower.config import Settings
    from watchtower.domain.health import HEALTHY
    from watchtower.runtime.sockets import bind
    from watchtower.services.ingest import KINDS
    from watchtower.simulator import objects as o

    class Clock:
        def now(self) -> float:
            return NOW

    rng = random.Random(1)
    settings = Settings()
    container = build_container(settings, clock=Clock(), source_health=lambda: HEALTHY, source_name="bench")
    w = container.queue_tracker
    w.on_list(
        "Namespace", [msgspec.Raw(orjson.dumps(o.namespace(f"team-{i}", team=f"t{i}"))) for i in range(40)]
    )
    w.on_list("PriorityClass", [msgspec.Raw(orjson.dumps(o.priority_class(n, v))) for n, v in TIERS])
    w.on_list("Node", [msgspec.Raw(orjson.dumps(o.node(f"gpu-{i}"))) for i in range(400)])
    w.on_list("ResourceQuota", [])
    pods = []
    for i in range(pending):
        cls, value = TIERS[rng.randrange(len(TIERS))]
        created = NOW - rng.uniform(0, 6 * 3600)
        pods.append(
            msgspec.Raw(
                orjson.dumps(
                    o.pod(
                        name=f"job-{i}",
                        namespace=f"team-{i % 40}",
                        created=created,
                        gpus=rng.choice((1, 2, 4, 8)),
                        priority=value,
                        priority_class=cls,
                        conditions=[o.unschedulable(created + 1, MESSAGE)],
                        annotations={"watchtower.io/note": f"owner: user{i % 300}@example.com"},
                    )
                )
            )
        )
    w.on_list("Pod", pods)
    w.on_list("Event", [])
    # The kinds the bench has none of are listed empty, as a cluster with no Jobs would: the first full
    # listing is what freezes the collector, as in the service.
    for kind in KINDS:
        if not w.feeds.feeds[kind].listed_at:
            w.on_list(kind, [])
    t0 = time.perf_counter()
    picture = w.evaluate(NOW)
    evaluate_s = time.perf_counter() - t0
    app = create_app(container)
    t0 = time.perf_counter()
    docs = container.documents.for_tick(picture)
    build_s = time.perf_counter() - t0
    sock = bind("127.0.0.1", 0)
    print(sock.getsockname()[1], len(docs.rows), evaluate_s, build_s, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")).run(
        sockets=[sock]
    )


async def load(url: str, *, clients: int, requests: int) -> tuple[list[float], int]:
    """Return per-request latencies (s) and bytes of the last body: `clients` workers share `requests`."""
    latencies: list[float] = []
    left = requests
    size = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            nonlocal left, size
            while left > 0:
                left -= 1
                t0 = time.perf_counter()
                r = await client.get(url)
                body = r.content
                latencies.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    raise RuntimeError(f"{url}: HTTP {r.status_code}: {body[:200]!r}")
                size = len(body)

        await asyncio.gather(*(worker() for _ in range(clients)))
    return latencies, size


_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def _seconds(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"wrk latency {text!r}")
    return float(m.group(1)) * _UNIT[m.group(2)]


def wrk(url: str, *, clients: int, seconds: int) -> tuple[float, float, float]:
    """Return (p50 s, p99 s, requests/s) from a wrk run with `clients` connections."""
    out = subprocess.run(
        ["wrk", "-t2", f"-c{clients}", f"-d{seconds}s", "--timeout", "30s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    if not (p50 and p99 and rps) or "Non-2xx" in out:
        raise RuntimeError(f"wrk output not understood or errors:\n{out}")
    return _seconds(p50.group(1)), _seconds(p99.group(1)), float(rps.group(1))


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(q * len(s) + 0.999999) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=2000, help="per target, with --httpx")
    ap.add_argument("--seconds", type=int, default=10, help="per target, with wrk")
    ap.add_argument("--httpx", action="store_true", help="generate the load from Python even if wrk is there")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.pending)
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--pending", str(a.pending)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port_s, rows, evaluate_s, build_s = child.stdout.readline().split()
        base = f"http://127.0.0.1:{port_s}"
        print(
            f"state: {a.pending} pending pods → {rows} workloads; one evaluation {float(evaluate_s) * 1000:.0f} ms, "
            f"JSON documents for it {float(build_s) * 1000:.0f} ms (once per evaluation)"
        )
        use_wrk = shutil.which("wrk") is not None and not a.httpx
        how = f"wrk, {a.seconds} s per target" if use_wrk else f"httpx, {a.requests} requests per target"
        print(f"{a.clients} concurrent clients ({how})\n")
        targets = [
            ("/healthz (reference)", "/healthz"),
            ("/api/v1/queue (first page, default 100)", "/api/v1/queue"),
            ("/api/v1/queue?limit=500", "/api/v1/queue?limit=500"),
            ("/api/v1/queue?tier=critical&namespace=team-3", "/api/v1/queue?tier=critical&namespace=team-3"),
            (
                "/api/v1/queue?state=waiting&offset=10000&limit=100",
                "/api/v1/queue?state=waiting&offset=10000&limit=100",
            ),
            ("/healthz (reference, again)", "/healthz"),
        ]
        print(f"{'target':55} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'bytes':>9}")
        for label, path in targets:
            _, size = asyncio.run(load(base + path, clients=1, requests=1))
            if use_wrk:
                p50, p99, rps = wrk(base + path, clients=a.clients, seconds=a.seconds)
            else:
                asyncio.run(load(base + path, clients=a.clients, requests=a.clients * 2))  # warm up
                t0 = time.perf_counter()
                lat, _ = asyncio.run(load(base + path, clients=a.clients, requests=a.requests))
                p50, p99, rps = pct(lat, 0.5), pct(lat, 0.99), len(lat) / (time.perf_counter() - t0)
            print(f"{label:55} {p50 * 1000:8.1f} {p99 * 1000:8.1f} {rps:8.0f} {size:9d}")
        # The whole queue in one answer: big, so few requests; shown for scale, not against the target.
        lat, size = asyncio.run(load(base + f"/api/v1/queue?limit={a.pending}", clients=5, requests=20))
        print(
            f"{'whole queue in one answer (5 clients, 20 requests)':55} {pct(lat, 0.5) * 1000:8.1f} "
            f"{pct(lat, 0.99) * 1000:8.1f} {'':>8} {size:9d}"
        )
        print("\ntarget (DESIGN §8): /api/v1/queue p99 ≤ 200 ms at 50 concurrent clients with 20,000 pending")
    finally:
        os.kill(child.pid, signal.SIGTERM)
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()


if __name__ == "__main__":
    main()
