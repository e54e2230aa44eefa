"""The simulator's /metrics: series shaped as dcgm-exporter and kube-state-metrics expose them.

Label names, label order, HELP texts and value formats follow /work/shared/EXPORTERS.md, so queries,
rules and dashboards written against the simulator work unchanged on a real cluster. Utilisation is a
deterministic function of (pod, GPU, time): the same instant always renders the same text.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import zlib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from watchtower.config.model import SimulatorConfig
from watchtower.simulator.objects import new_uid
from watchtower.simulator.pods import SimPod, memory_bytes
from watchtower.simulator.workloads import Pattern

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "535.129.03"
FB_TOTAL_MIB = 81559
IDLE_WATTS, MAX_WATTS = 72.0, 700.0
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
SAMPLE_EVERY = 15.0  # utilisation changes between scrapes, not within one


class ClusterView(Protocol):
    """What the series are rendered from: the simulated cluster's nodes, pods, namespaces and quotas."""

    @property
    def config(self) -> SimulatorConfig: ...

    @property
    def nodes(self) -> dict[str, dict[str, Any]]: ...

    @property
    def namespaces(self) -> dict[str, dict[str, Any]]: ...

    @property
    def quotas(self) -> dict[str, dict[str, Any]]: ...

    def live_pods(self) -> Iterable[SimPod]: ...

    def node_ip(self, name: str) -> str: ...


def _esc(v: str) -> str:
    if "\\" not in v and "\n" not in v and '"' not in v:
        return v  # most values: half a million a simulated day go through here
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _pairs(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{_esc(v)}"' for k, v in pairs)


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return "{" + _pairs(pairs) + "}"


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


@dataclass
class _Family:
    name: str
    help: str
    lines: list[str] = field(default_factory=list)
    wanted: bool = True  # False: rendered by nobody (`render_metrics(only=...)`), its lines not made

    def add(self, labels: Iterable[tuple[str, str]], value: str) -> None:
        if self.wanted:
            self.lines.append(f"{self.name}{_labels(labels)} {value}")

    def add_after(self, base: str, more: Iterable[tuple[str, str]], value: str) -> None:
        """Add a line whose first labels are already rendered (`_pairs`), then `more`: a pod's namespace,
        pod and uid, shared by all its lines."""
        if self.wanted:
            rest = _pairs(more)
            self.lines.append(
                f"{self.name}{{{base},{rest}}} {value}" if rest else f"{self.name}{{{base}}} {value}"
            )

    def add_text(self, labels: str, value: str) -> None:
        """Add a line whose label set is already rendered (`_labels`): one GPU's, shared by five families."""
        if self.wanted:
            self.lines.append(f"{self.name}{labels} {value}")

    def text(self) -> str:
        return f"# HELP {self.name} {self.help}\n# TYPE {self.name} gauge\n" + "".join(
            line + "\n" for line in self.lines
        )


def _noise(*parts: object) -> float:
    """A stable pseudo-random number in [0, 1) for these parts."""
    return zlib.crc32("/".join(map(str, parts)).encode()) / 2**32


BURSTY_FLOOR = 12  # percent


def utilisation(pattern: Pattern, uid: str, gpu: int, now: float) -> int:
    """Return GPU utilisation in % for a pod's GPU at a time: busy training, bursty serving, or idle."""
    slot = int(now // SAMPLE_EVERY)
    n = _noise(uid, gpu, slot)
    if pattern is Pattern.BUSY:
        return min(100, int(86 + 13 * n))
    if pattern is Pattern.IDLE:
        return int(4 * n)
    day = 0.5 + 0.5 * math.sin(2 * math.pi * ((now % 86400) / 86400 - 0.3))
    # Serving is quiet at night but never idle by the default θ (10 %): a dip of every sample under it for a
    # whole idle window would make the simulator's serving pods idle holders by chance.
    return max(BURSTY_FLOOR, min(100, int(20 + 60 * day + 30 * (n - 0.5))))


def _gpu_labels(node: str, i: int) -> list[tuple[str, str]]:
    return [
        ("gpu", str(i)),
        ("UUID", "GPU-" + new_uid(f"gpu/{node}/{i}")),
        ("pci_bus_id", f"00000000:{0x18 + 0x10 * i:02X}:00.0"),
        ("device", f"nvidia{i}"),
        ("modelName", MODEL),
        ("Hostname", node),
        ("DCGM_FI_DRIVER_VERSION", DRIVER),
    ]


def _dcgm(sim: ClusterView, now: float, only: Collection[str] | None = None) -> list[_Family]:
    util = _Family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
    used = _Family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
    free = _Family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
    power = _Family("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")
    gr = _Family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.")
    _only([util, used, free, power, gr], only)
    owner: dict[tuple[str, int], SimPod] = {}
    for q in sim.live_pods():
        if q.node and not q.terminal:
            for i in q.gpu_ids:
                owner[(q.node, i)] = q
    for node in sim.nodes:
        for i in range(sim.config.gpus_per_node):
            labels = _gpu_labels(node, i)
            p = owner.get((node, i))
            if p is not None and p.running_since is not None:
                u = utilisation(p.pattern, p.uid, i, now)
                mem = int(
                    FB_TOTAL_MIB * (0.15 if p.pattern is Pattern.IDLE else 0.55 + 0.4 * _noise(p.uid, i))
                )
            else:
                u, mem = 0, 0 if p is None else 512  # a pod still pulling its image holds a context
            if p is not None:
                # Kubernetes attributes come last, alphabetical (container, namespace, pod).
                labels += [("container", "main"), ("namespace", p.namespace), ("pod", p.name)]
            text = _labels(labels)
            util.add_text(text, str(u))
            used.add_text(text, str(mem))
            free.add_text(text, str(FB_TOTAL_MIB - mem))
            power.add_text(text, f"{IDLE_WATTS + (MAX_WATTS - IDLE_WATTS) * u / 100:.6f}")
            gr.add_text(text, f"{min(1.0, u / 100 * 0.97):.6f}")
    return [util, used, free, power, gr]


def _ksm(sim: ClusterView, only: Collection[str] | None = None) -> list[_Family]:
    info = _Family("kube_pod_info", "Information about pod.")
    owner = _Family("kube_pod_owner", "Information about the Pod's owner.")
    phase = _Family("kube_pod_status_phase", "The pods current phase.")
    sched = _Family(
        "kube_pod_status_scheduled", "Describes the status of the scheduling process for the pod."
    )
    created = _Family("kube_pod_created", "Unix creation timestamp")
    started = _Family("kube_pod_start_time", "Start time in unix timestamp for a pod.")
    sched_t = _Family("kube_pod_status_scheduled_time", "Unix timestamp when pod moved into scheduled status")
    req = _Family(
        "kube_pod_container_resource_requests",
        "The number of requested request resource by a container. It is recommended to use the "
        "kube_pod_resource_requests metric exposed by kube-scheduler instead, as it is more precise.",
    )
    reason = _Family(
        "kube_pod_status_reason",
        "The pod status reasons",
    )
    _only([info, owner, phase, sched, created, started, sched_t, req, reason], only)
    for p in sorted(sim.live_pods(), key=lambda p: (p.namespace, p.name, p.uid)):
        base = _pairs((("namespace", p.namespace), ("pod", p.name), ("uid", p.uid)))
        o = p.owner
        info.add_after(
            base,
            [
                ("host_ip", sim.node_ip(p.node) if p.node else ""),
                ("pod_ip", p.ip),
                ("node", p.node),
                ("created_by_kind", o["kind"] if o else "<none>"),
                ("created_by_name", o["name"] if o else "<none>"),
                ("priority_class", p.priority_class),
                ("host_network", "false"),
            ],
            "1",
        )
        if o:
            owner.add_after(
                base,
                [("owner_kind", o["kind"]), ("owner_name", o["name"]), ("owner_is_controller", "true")],
                "1",
            )
        else:
            owner.add_after(
                base,
                [("owner_kind", "<none>"), ("owner_name", "<none>"), ("owner_is_controller", "<none>")],
                "1",
            )
        for ph in PHASES:
            phase.add_after(base, [("phase", ph)], "1" if p.phase == ph else "0")
        c = p.sched_cond
        if c is not None:
            for cond in ("true", "false", "unknown"):
                sched.add_after(base, [("condition", cond)], "1" if c["status"].lower() == cond else "0")
            if c["status"] == "True":
                sched_t.add_after(base, (), _num(_ts(c["lastTransitionTime"])))
        created.add_after(base, (), _num(p.created))
        if p.start_time is not None:
            started.add_after(base, (), _num(p.start_time))
        cbase = f"{base},{_pairs((('container', 'main'), ('node', p.node)))}"
        if p.gpus:
            req.add_after(cbase, [("resource", "nvidia_com_gpu"), ("unit", "integer")], str(p.gpus))
        req.add_after(cbase, [("resource", "cpu"), ("unit", "core")], _num(p.cpu_millis / 1000))
        req.add_after(cbase, [("resource", "memory"), ("unit", "byte")], _num(p.memory_bytes))
        if p.disruption is not None and p.disruption.get("reason"):
            reason.add_after(base, [("reason", p.disruption["reason"])], "1")
    alloc = _Family(
        "kube_node_status_allocatable",
        "The allocatable for different resources of a node that are available for scheduling.",
    )
    cap = _Family("kube_node_status_capacity", "The capacity for different resources of a node.")
    _only([alloc, cap], only)
    for name, n in sim.nodes.items():
        a = n["status"]["allocatable"]
        for fam in (alloc, cap):
            if "nvidia.com/gpu" in a:  # a DRA-only node publishes its GPUs in a ResourceSlice instead
                fam.add(
                    [("node", name), ("resource", "nvidia_com_gpu"), ("unit", "integer")],
                    a["nvidia.com/gpu"],
                )
            fam.add([("node", name), ("resource", "cpu"), ("unit", "core")], a["cpu"])
            if "memory" in a:  # bytes, as kube-state-metrics converts the quantity
                fam.add(
                    [("node", name), ("resource", "memory"), ("unit", "byte")],
                    str(memory_bytes(a["memory"])),
                )
            fam.add([("node", name), ("resource", "pods"), ("unit", "integer")], a["pods"])
    # KSM's namespaces collector, run with --metric-labels-allowlist=namespaces=[*]: every namespace label
    # as `label_<name>` with the name sanitised; the team of a namespace is read from its `team` label.
    ns_labels = _Family("kube_namespace_labels", "Kubernetes labels converted to Prometheus labels.")
    _only([ns_labels], only)
    for ns, nobj in sorted(sim.namespaces.items()):
        labels = nobj["metadata"].get("labels", {})
        ns_labels.add([("namespace", ns), *sorted((_label_name(k), str(v)) for k, v in labels.items())], "1")
    quota = _Family("kube_resourcequota", "Information about resource quota.")
    _only([quota], only)
    for ns, q in sim.quotas.items():
        for typ in ("hard", "used"):
            for res, val in sorted(q["status"][typ].items()):
                quota.add(
                    [
                        ("namespace", ns),
                        ("resourcequota", q["metadata"]["name"]),
                        ("resource", res),
                        ("type", typ),
                    ],
                    val,
                )
    return [info, owner, phase, sched, created, started, sched_t, req, reason, alloc, cap, ns_labels, quota]


def _only(fams: list[_Family], only: Collection[str] | None) -> list[_Family]:
    """Mark the families not in `only` (all when None) as unwanted; return them all."""
    if only is not None:
        for f in fams:
            f.wanted = f.name in only
    return fams


def _label_name(k: str) -> str:
    return "label_" + "".join(c if c.isalnum() and c.isascii() else "_" for c in k)


def _ts(s: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def render_metrics(
    sim: ClusterView, now: float, *, which: str = "all", only: Collection[str] | None = None
) -> str:
    """Return the exposition text: `which` is "all", "dcgm" or "kube-state-metrics"; `only`: just these
    metric families (the demo's past week samples those its report reads, every 5 simulated minutes)."""
    fams: list[_Family] = []
    if which in ("all", "dcgm"):
        fams += _dcgm(sim, now, only)
    if which in ("all", "kube-state-metrics"):
        fams += _ksm(sim, only)
    if which not in ("all", "dcgm", "kube-state-metrics"):
        raise ValueError(f"unknown metrics set {which!r}")
    return "".join(f.text() for f in fams if f.lines)


# ---- a tiny HTTP server ----------------------------------------------------------------------------

_PATHS = {"/metrics": "all", "/metrics/dcgm": "dcgm", "/metrics/kube-state-metrics": "kube-state-metrics"}


class MetricsServer:
    def __init__(self, server: asyncio.Server) -> None:
        self._server = server
        self.port: int = server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._server.close()
        await self._server.wait_closed()


async def serve_metrics(
    render: Callable[[str], str], *, host: str = "127.0.0.1", port: int = 0
) -> MetricsServer:
    """Serve GET /metrics (all), /metrics/dcgm and /metrics/kube-state-metrics in the running event loop."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            which = _PATHS.get(path)
            if method not in ("GET", "HEAD"):
                status, body, ctype = "405 Method Not Allowed", b"only GET\n", "text/plain; charset=utf-8"
            elif which is None:
                status, body, ctype = "404 Not Found", b"try /metrics\n", "text/plain; charset=utf-8"
            else:
                status, body, ctype = "200 OK", render(which).encode(), CONTENT_TYPE
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            if method != "HEAD":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_server(handle, host, port)
    return MetricsServer(server)
