"""Soak: the service as deployed, on N pods with steady churn, 50 API clients, alerting and GPU usage on.

The service runs as `watchtower run` does (one process, the only replica and so the leader), against a fake
Kubernetes API server in a process of its own. The fake server rather than the simulator: the simulator runs
inside the service's process, so its own churn would count against the service's CPU and memory, and its
pods are lean; the fake server serves bench/_podgen.py's realistic ~4 KB pods (LIST paged by 500, then one
pod watch stream carrying --rate MODIFIED events/s, each changing an annotation the service keeps), and
lists of namespaces, priority classes and 1,200 GPU nodes; the optional CRDs answer 404, as on a cluster
without them. GPU usage reads a real Prometheus (Debian package) when the binary is there; it holds no
DCGM series, so the queries run and return nothing. Alerting delivers to a webhook receiver on 127.0.0.1
in this process, which counts notifications by their idempotency key (`webhook-id`).

While `wrk` (or, without it, httpx from this process) keeps 50 clients on /api/v1/queue, this process:

  - every 2 s, in turn, adds a pending pod to namespace `soak-probe` through the watch stream or deletes it, and
    polls /api/v1/queue?namespace=soak-probe and /metrics until each shows the change: the time from the
    event being handed to the fake server to the change being served is the change latency;
  - every --alert-every s adds, in a new namespace `soak-alert-K`, a critical-tier pod pending for an hour:
    each such namespace must get exactly one notification (none lost, none duplicated);
  - samples the service's RSS and CPU from /proc every 2 s;
  - asks /healthz once every 0.25 s alone: the service has no loop-stall metric of its own, so the slowest
    answer is the upper bound on a stall (it includes queuing behind the 50 clients).

    .venv/bin/python bench/soak.py [--pods 150000] [--rate 500] [--clients 50] [--minutes 10]

Targets (DESIGN §8, soak): change → picture and /metrics ≤ 1 s p99; /api/v1/queue p99 ≤ 100 ms; RSS flat
after warm-up (growth beyond 5 % flagged); nothing lost or duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import _podgen  # noqa: E402
from _harness import kubeconfig_for, proc_cpu_seconds, proc_rss_bytes  # noqa: E402
from api_load import pct, wrk  # noqa: E402

from watchtower.domain.forms.registry import WATCHED  # noqa: E402
from watchtower.domain.promql.names import PENDING_WORKLOADS  # noqa: E402
from watchtower.simulator import objects as o  # noqa: E402

SECRET = "whsec_" + base64.b64encode(b"soak-benchmark-secret-0123456789").decode()
PROBE_NS = "soak-probe"
GROUP_WAIT = 2.0
NODES = 1200


# ---- the fake API server (its own process) ---------------------------------------------------------------


def _list(kind: str, items: list[bytes], rv: str = "1000") -> bytes:
    return (
        b'{"kind":"'
        + kind.encode()
        + b'List","apiVersion":"v1","metadata":{"resourceVersion":"'
        + rv.encode()
        + b'"},"items":['
        + b",".join(items)
        + b"]}"
    )


def _probe_pod(name: str, ns: str, created: float, *, critical: bool, rv: int) -> bytes:
    prio, pclass = (1_000_000, "urgent-debug") if critical else (100_000, "batch")
    return orjson.dumps(
        o.pod(
            name=name,
            namespace=ns,
            created=created,
            uid=o.new_uid(f"soak/{ns}/{name}"),
            gpus=8,
            priority=prio,
            priority_class=pclass,
            conditions=[o.unschedulable(created + 1, _podgen.MESSAGE)],
            resource_version=str(rv),
        )
    )


def serve_cluster(port_file: Path, n: int, rate: float, seed: int) -> None:
    """Serve the LISTs, one churning pod watch, and /soak/probe to put probe pods into that watch."""
    # The pods' creation times are hours before now, as on a live cluster, so waits and alerts are real
    # against the service's wall clock (the module's fixed T0 would put them in the future).
    _podgen.T0 = time.time()
    items = _podgen.pod_bytes(n, seed)
    page = 500
    pod_pages = []
    for s in range(0, max(n, 1), page):
        meta: dict[str, Any] = {"resourceVersion": "1000"}
        if s + page < n:
            meta["continue"] = f"p{s + page}"
        head = b'{"kind":"PodList","apiVersion":"v1","metadata":' + orjson.dumps(meta) + b',"items":['
        pod_pages.append(head + b",".join(items[s : s + page]) + b"]}")
    lists: dict[str, bytes] = {
        "/api/v1/namespaces": _list(
            "Namespace", [orjson.dumps(o.namespace(f"team-{t}", team=t)) for t in _podgen.TEAMS]
        ),
        "/apis/scheduling.k8s.io/v1/priorityclasses": _list(
            "PriorityClass", [orjson.dumps(o.priority_class(c, v)) for v, c in _podgen.CLASSES]
        ),
        "/api/v1/nodes": _list("Node", [orjson.dumps(o.node(f"gpu-node-{i:04d}")) for i in range(NODES)]),
    }
    required = {k.path: k.name for k in WATCHED if not k.optional}
    rv_lock = threading.Lock()
    rv = [2000]
    probes: collections.deque[bytes] = collections.deque()
    note = b'"annotations":{'
    rng = random.Random(seed)

    def next_rv() -> int:
        with rv_lock:
            rv[0] += 1
            return rv[0]

    def churn_event() -> bytes:
        i = rng.randrange(len(items)) if items else 0
        r = next_rv()
        obj = items[i].replace(b'"resourceVersion":"1"', b'"resourceVersion":"%d"' % r, 1)
        obj = obj.replace(note, note + b'"watchtower.io/note":"churn %d",' % r, 1)
        return b'{"type":"MODIFIED","object":' + obj + b"}"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            u = urlsplit(self.path)
            q = {k: v[-1] for k, v in parse_qs(u.query).items()}
            if u.path != "/soak/probe":
                self._send(404, b"{}")
                return
            created = time.time() - float(q.get("age", "0"))
            obj = _probe_pod(q["name"], q["ns"], created, critical=q.get("critical") == "1", rv=next_rv())
            typ = b"DELETED" if q.get("op") == "del" else b"ADDED"
            probes.append(b'{"type":"' + typ + b'","object":' + obj + b"}")
            self._send(200, b"{}")

        def do_GET(self) -> None:
            u = urlsplit(self.path)
            q = {k: v[-1] for k, v in parse_qs(u.query).items()}
            if u.path == "/metrics":  # what Prometheus scrapes here: no GPU series
                self._send(200, b"")
                return
            if u.path not in required:
                self._send(404, b'{"kind":"Status","code":404}')
                return
            if q.get("watch") == "true":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                until = time.monotonic() + float(q.get("timeoutSeconds", "3600"))
                try:
                    if u.path != "/api/v1/pods":
                        # As kube-apiserver's watch cache does for a watch that asked for bookmarks: one a
                        # minute (`defaultBookmarkFrequency`), so an idle kind is not taken for a silent, dead watch.
                        bookmark = (
                            b'{"type":"BOOKMARK","object":{"kind":"%s","apiVersion":"v1",'
                            % (required[u.path].encode())
                            + b'"metadata":{"resourceVersion":"1000"}}}'
                        )
                        next_mark = time.monotonic() + 60
                        while time.monotonic() < until:
                            time.sleep(1)
                            if time.monotonic() >= next_mark and q.get("allowWatchBookmarks") == "true":
                                self.wfile.write(b"%x\r\n%s\n\r\n" % (len(bookmark) + 1, bookmark))
                                self.wfile.flush()
                                next_mark += 60
                    else:
                        self._churn(until)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass  # the client went away
                return
            if u.path == "/api/v1/pods":
                cont = q.get("continue", "")
                self._send(200, pod_pages[int(cont[1:]) // page if cont else 0])
            else:
                self._send(200, lists.get(u.path, _list(required[u.path], [])))

        def _churn(self, until: float) -> None:
            w = self.wfile
            every = 0.02
            owed = 0.0
            while time.monotonic() < until:
                t = time.monotonic()
                owed += rate * every
                lines = []
                while probes:
                    lines.append(probes.popleft())
                while owed >= 1:
                    owed -= 1
                    lines.append(churn_event())
                for ln in lines:
                    w.write(b"%x\r\n%s\n\r\n" % (len(ln) + 1, ln))
                w.flush()
                time.sleep(max(0.0, every - (time.monotonic() - t)))

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    port_file.write_text(str(httpd.server_address[1]))
    httpd.serve_forever()


# ---- the webhook receiver (this process) -----------------------------------------------------------------


class Receiver:
    """Counts notifications by idempotency key (`webhook-id`) and the namespaces they name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_key: collections.Counter[str] = collections.Counter()
        # namespace → groupKey → how many notifications (distinct keys) that group got
        self.groups: collections.defaultdict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                key = self.headers.get("webhook-id", "")
                with contextlib.suppress(ValueError):
                    doc = json.loads(body)
                    with outer.lock:
                        outer.by_key[key] += 1
                        if outer.by_key[key] == 1:
                            spaces = {(a.get("labels") or {}).get("namespace") for a in doc.get("alerts", [])}
                            for ns in spaces - {None}:
                                outer.groups[ns][str(doc.get("groupKey"))] += 1
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- processes ---------------------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen[Any], grace: float = 15) -> None:
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def fake_cluster(d: Path, pods: int, rate: float, seed: int) -> Any:
    port_file = d / "cluster-port"
    cmd = [sys.executable, __file__, "--serve-cluster", str(port_file), "--pods", str(pods)]
    proc = subprocess.Popen([*cmd, "--rate", str(rate), "--seed", str(seed)])
    try:
        while not port_file.exists() or not port_file.read_text():
            if proc.poll() is not None:
                raise SystemExit(f"the fake API server exited with {proc.returncode}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        _stop(proc)


def service_config(d: Path, kubeconfig: Path, receiver: str, prometheus: str | None, every: float) -> Path:
    secret = d / "webhook-secret"
    secret.write_text(SECRET)
    cfg: dict[str, Any] = {
        "cluster": {"source": "kube", "kubeconfig": str(kubeconfig)},
        "queue": {"evaluate_every": f"{every}s"},
        "store": {"path": str(d / "watchtower.db")},
        "server": {"host": "127.0.0.1"},
        "alerting": {
            "route": {
                "receiver": "hook",
                "group_by": ["alertname", "namespace"],
                "group_wait": f"{GROUP_WAIT}s",
                "group_interval": "5m",
                "repeat_interval": "12h",
            },
            "receivers": [{"name": "hook", "webhooks": [{"url": receiver, "secret_file": str(secret)}]}],
        },
    }
    if prometheus:
        cfg["prometheus"] = {"url": prometheus, "query_every": "15s", "scrape_interval": "5s"}
    path = d / "watchtower.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@contextlib.contextmanager
def service(config: Path) -> Any:
    """Start `watchtower run` in its own process; yield (process, base URL)."""
    cmd = [sys.executable, "-m", "watchtower.cli", "run", "--config", str(config), "--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"serving at (http://\S+?)/?$", line.strip())
        if not m:
            raise SystemExit(f"the service did not start: {line!r} (exit {proc.poll()})")
        yield proc, m.group(1)
    finally:
        _stop(proc)


# ---- measuring ---------------------------------------------------------------------------------------------


@dataclass
class Figures:
    picture: list[float] = field(default_factory=list)  # s, change → /api/v1/queue
    metrics: list[float] = field(default_factory=list)  # s, change → /metrics
    missed: int = 0  # probe changes not seen within the probe timeout
    healthz: list[float] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)  # (s since start of measuring, bytes)
    cpu: float = 0.0  # seconds of CPU used by the service while measuring
    wall: float = 0.0
    queue_p50: float = 0.0
    queue_p99: float = 0.0
    queue_rps: float = 0.0
    queue_how: str = ""
    alert_namespaces: list[str] = field(default_factory=list)


def _pending_in(metrics_text: str, ns: str) -> float:
    total = 0.0
    needle = f'namespace="{ns}"'
    for line in metrics_text.splitlines():
        if line.startswith(PENDING_WORKLOADS + "{") and needle in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def probe_changes(
    api: httpx.AsyncClient, cluster: httpx.AsyncClient, f: Figures, until: float, timeout: float
) -> None:
    k = 0
    while time.monotonic() < until:
        name = f"probe-{k // 2}"
        add = k % 2 == 0
        t0 = time.monotonic()
        await cluster.post(
            "/soak/probe", params={"op": "add" if add else "del", "name": name, "ns": PROBE_NS, "age": "5"}
        )
        seen_q = seen_m = None
        while (seen_q is None or seen_m is None) and time.monotonic() - t0 < timeout:
            if seen_q is None:
                r = await api.get("/api/v1/queue", params={"namespace": PROBE_NS})
                if (name in r.text) == add:
                    seen_q = time.monotonic() - t0
            if seen_m is None:
                r = await api.get("/metrics")
                if (_pending_in(r.text, PROBE_NS) > 0) == add:
                    seen_m = time.monotonic() - t0
            await asyncio.sleep(0.05)
        for seen, into in ((seen_q, f.picture), (seen_m, f.metrics)):
            if seen is None:
                f.missed += 1
            else:
                into.append(seen)
        k += 1
        await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))


async def alert_probes(cluster: httpx.AsyncClient, f: Figures, until: float, every: float) -> None:
    k = 0
    while time.monotonic() < until:
        ns = f"soak-alert-{k}"
        await cluster.post(
            "/soak/probe", params={"op": "add", "name": "stuck", "ns": ns, "age": "3600", "critical": "1"}
        )
        f.alert_namespaces.append(ns)
        k += 1
        await asyncio.sleep(every)


async def sample_process(pid: int, f: Figures, until: float, t_start: float) -> None:
    while time.monotonic() < until:
        f.rss.append((time.monotonic() - t_start, proc_rss_bytes(pid)))
        await asyncio.sleep(2.0)


async def healthz_prober(api: httpx.AsyncClient, f: Figures, until: float) -> None:
    while time.monotonic() < until:
        t = time.monotonic()
        await api.get("/healthz")
        f.healthz.append(time.monotonic() - t)
        await asyncio.sleep(0.25)


async def httpx_load(url: str, clients: int, until: float) -> tuple[float, float, float]:
    lat: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as c:

        async def worker() -> None:
            while time.monotonic() < until:
                t = time.monotonic()
                await c.get(url)
                lat.append(time.monotonic() - t)

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(clients)))
        took = time.monotonic() - t0
    return pct(lat, 0.5), pct(lat, 0.99), len(lat) / took


async def measure(
    base: str, cluster_url: str, pid: int, *, seconds: float, clients: int, alert_every: float, use_wrk: bool
) -> Figures:
    f = Figures()
    t_start = time.monotonic()
    until = t_start + seconds
    async with (
        httpx.AsyncClient(base_url=base, timeout=30) as api,
        httpx.AsyncClient(base_url=cluster_url, timeout=30) as cluster,
    ):
        cpu0 = proc_cpu_seconds(pid)
        if use_wrk:
            f.queue_how = f"wrk, {clients} connections"
            load = asyncio.to_thread(
                wrk, base + "/api/v1/queue", clients=clients, seconds=max(1, int(seconds))
            )
        else:
            f.queue_how = f"httpx from the bench, {clients} clients"
            load = httpx_load(base + "/api/v1/queue", clients, until)
        # Alert probes stop early enough for the last one's notification to be due before the end.
        alert_until = until - (GROUP_WAIT + 3 * 1.0) - 5
        results = await asyncio.gather(
            load,
            probe_changes(api, cluster, f, until, timeout=10.0),
            alert_probes(cluster, f, max(alert_until, t_start + 0.1), alert_every),
            sample_process(pid, f, until, t_start),
            healthz_prober(api, f, until),
        )
        f.queue_p50, f.queue_p99, f.queue_rps = results[0]
        f.wall = time.monotonic() - t_start
        f.cpu = proc_cpu_seconds(pid) - cpu0
    return f


async def wait_ready(base: str, proc: subprocess.Popen[Any], limit: float) -> float:
    t0 = time.monotonic()
    async with httpx.AsyncClient(base_url=base, timeout=30) as api:
        while time.monotonic() - t0 < limit:
            if proc.poll() is not None:
                raise SystemExit(f"the service exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if (await api.get("/readyz")).status_code == 200:
                    return time.monotonic() - t0
            await asyncio.sleep(0.5)
    raise SystemExit(f"the service was not ready within {limit:.0f} s")


async def warm_up(pid: int, seconds: float) -> list[tuple[float, int]]:
    out = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        out.append((time.monotonic() - t0, proc_rss_bytes(pid)))
        await asyncio.sleep(2.0)
    return out


def _row(label: str, measured: str, target: str) -> None:
    print(f"{label:46} {measured:>24}   {target}")


def _ms(xs: list[float], q: float) -> str:
    return f"{pct(xs, q) * 1000:.0f}" if xs else "-"


def report(
    a: argparse.Namespace, ready_s: float, warm: list[tuple[float, int]], f: Figures, rcv: Receiver
) -> None:
    mib = 1024 * 1024
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"pods {a.pods:,}  churn {a.rate:g} events/s  clients {a.clients}  measured {f.wall:.0f} s after "
        f"{a.warmup:g} s of warm-up; LIST to ready {ready_s:.1f} s; load average at the end {load}"
    )
    _row("figure", "measured", "target / reference")
    _row(
        "change → /api/v1/queue p50 / p99",
        f"{_ms(f.picture, 0.5)} / {_ms(f.picture, 0.99)} ms",
        f"≤ 1000 ms p99 (evaluate_every {a.evaluate_every:g} s)",
    )
    _row("change → /metrics p50 / p99", f"{_ms(f.metrics, 0.5)} / {_ms(f.metrics, 0.99)} ms", "≤ 1000 ms p99")
    _row(
        "probe changes seen / not seen within 10 s",
        f"{len(f.picture) + len(f.metrics)} / {f.missed}",
        "- / 0",
    )
    _row(
        f"/api/v1/queue p50 / p99 ({f.queue_how})",
        f"{f.queue_p50 * 1000:.1f} / {f.queue_p99 * 1000:.1f} ms",
        f"≤ 100 ms p99; {f.queue_rps:,.0f} req/s",
    )
    _row(
        "lone /healthz p50 / max (loop-stall bound)",
        f"{_ms(f.healthz, 0.5)} / {max(f.healthz, default=0) * 1000:.0f} ms",
        "no stall metric in the service; includes queuing behind the clients",
    )
    _row(
        "service CPU",
        f"{100 * f.cpu / f.wall if f.wall else 0:.0f} %",
        "of one core, over the measured window",
    )
    rss = [r for _, r in f.rss] or [0]
    # The first fifth of the measured window is the warm-up under load (connections, caches, the
    # allocator's arenas): flatness is judged from its end to the end of the run.
    settled = next((r for t, r in f.rss if t >= f.wall / 5), rss[-1])
    last, peak = rss[-1], max(rss)
    growth = (last - settled) / settled * 100 if settled else 0.0
    _row(
        "service RSS start / at 1/5 / end / peak",
        f"{rss[0] / mib:.0f} / {settled / mib:.0f} / {last / mib:.0f} / {peak / mib:.0f} MiB",
        f"{growth:+.1f} % from 1/5 to end ({'flat' if abs(growth) <= 5 else 'GROWTH BEYOND 5 % FLAGGED'}; ≤ 5 %)",
    )
    if warm:
        _row(
            "service RSS during warm-up, first / last",
            f"{warm[0][1] / mib:.0f} / {warm[-1][1] / mib:.0f} MiB",
            "",
        )
    series = " ".join(f"{t:.0f}s:{r / mib:.0f}" for t, r in f.rss[:: max(1, len(f.rss) // 12)])
    print(f"  RSS over time (s since measuring starts: MiB)  {series}")
    with rcv.lock:
        dup_keys = sum(c - 1 for c in rcv.by_key.values() if c > 1)
        lost = [ns for ns in f.alert_namespaces if not rcv.groups.get(ns)]
        # A probe's groups (one per alertname) do not change once they fire, and repeat_interval is 12 h:
        # a second notification of one of them is a duplicate.
        extra = sum(c - 1 for ns in f.alert_namespaces for c in rcv.groups.get(ns, {}).values())
        groups = sum(len(rcv.groups.get(ns, {})) for ns in f.alert_namespaces)
        total = sum(rcv.by_key.values())
    n = len(f.alert_namespaces)
    _row(
        "alert probes notified / expected",
        f"{n - len(lost)} / {n}",
        f"all ({groups} groups, one per alertname)",
    )
    _row("notifications lost / duplicated", f"{len(lost)} / {dup_keys + extra}", "0 / 0")
    _row("notifications received in all", f"{total}", "the background's wait alerts included")


async def run(a: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="watchtower-soak-") as tmp:
        d = Path(tmp)
        rcv = Receiver()
        prom = None
        try:
            with fake_cluster(d, a.pods, a.rate, a.seed) as cluster_url:
                prom_url = None
                if a.prometheus and shutil.which("prometheus"):
                    from watchtower.adapters.prometheus.process import start_local_prometheus

                    prom = start_local_prometheus(
                        exporter_port=int(cluster_url.rsplit(":", 1)[1]), workdir=d / "prom"
                    )
                    prom_url = prom.url if prom else None
                kubeconfig = kubeconfig_for(cluster_url, d / "kubeconfig")
                cfg = service_config(d, kubeconfig, rcv.url, prom_url, a.evaluate_every)
                print(
                    f"GPU usage: {'a real Prometheus at ' + prom_url if prom_url else 'off (no prometheus binary, or --no-prometheus)'}"
                )
                with service(cfg) as (proc, base):
                    ready_s = await wait_ready(base, proc, a.ready_timeout)
                    warm = await warm_up(proc.pid, a.warmup)
                    # api_load.wrk runs two threads, and wrk wants a connection per thread at least.
                    use_wrk = shutil.which("wrk") is not None and not a.httpx and a.clients >= 2
                    f = await measure(
                        base,
                        cluster_url,
                        proc.pid,
                        seconds=a.minutes * 60,
                        clients=a.clients,
                        alert_every=a.alert_every,
                        use_wrk=use_wrk,
                    )
                    # The last probe's notification is due within group_wait; give it that and a margin.
                    deadline = time.monotonic() + GROUP_WAIT + 10
                    while time.monotonic() < deadline:
                        with rcv.lock:
                            if all(rcv.groups.get(ns) for ns in f.alert_namespaces):
                                break
                        await asyncio.sleep(0.5)
                    report(a, ready_s, warm, f, rcv)
        finally:
            rcv.stop()
            if prom is not None:
                prom.stop()
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--rate", type=float, default=500.0, help="pod events/s of churn")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--minutes", type=float, default=10.0, help="measured time, after the warm-up")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds after ready before measuring")
    ap.add_argument("--alert-every", type=float, default=30.0, help="seconds between alert probes")
    ap.add_argument("--evaluate-every", type=float, default=0.5, help="the service's queue.evaluate_every")
    ap.add_argument("--ready-timeout", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--httpx", action="store_true", help="load from Python even if wrk is there")
    ap.add_argument("--no-prometheus", dest="prometheus", action="store_false")
    ap.add_argument("--serve-cluster", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_cluster:
        serve_cluster(a.serve_cluster, a.pods, a.rate, a.seed)
        return
    raise SystemExit(asyncio.run(run(a)))


if __name__ == "__main__":
    main()
