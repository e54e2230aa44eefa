"""DCGM-exporter and kube-state-metrics text as the real exporters write it (see ../shared/EXPORTERS.md),
in the label spellings users meet: plain, lowercase `hostname`, old-compatible `pod_name`/`uuid`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "535.129.03"


@dataclass
class Device:
    gpu: int
    host: str
    pod: str = ""
    namespace: str = ""
    container: str = "main"
    profile: str = ""  # GPU_I_PROFILE for a MIG slice
    instance: str = ""  # GPU_I_ID
    util: Callable[[int], float] | float = 0.0  # percent; a callable gets the scrape number

    @property
    def uuid(self) -> str:
        return f"GPU-{self.host}-{self.gpu:04d}-0000-0000-000000000000"

    def value(self, scrape: int) -> float:
        return self.util(scrape) if callable(self.util) else self.util


@dataclass
class KsmPod:
    namespace: str
    pod: str
    gpus: int
    owner_kind: str = "PaddleJob"
    owner_name: str = ""
    priority_class: str = "batch"
    phase: str = "Running"
    node: str = "node-1"
    uid: str = field(default="")

    def __post_init__(self) -> None:
        self.uid = self.uid or f"uid-{self.namespace}-{self.pod}"


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def dcgm_text(devices: Iterable[Device], *, spelling: str = "plain", scrape: int = 0) -> str:
    """Return dcgm-exporter text; spelling "plain" (4.x), "lower" (main branch `hostname`) or "compat"."""
    host_label = "hostname" if spelling == "lower" else "Hostname"
    uuid_label = "uuid" if spelling == "compat" else "UUID"
    util, prof, fb = [], [], []
    for d in devices:
        pairs = [
            ("gpu", str(d.gpu)),
            (uuid_label, d.uuid),
            ("pci_bus_id", f"00000000:{0x1A + d.gpu:02X}:00.0"),
            ("device", f"nvidia{d.gpu}"),
            ("modelName", MODEL),
        ]
        if d.profile:
            pairs += [("GPU_I_PROFILE", d.profile), ("GPU_I_ID", d.instance)]
        pairs += [(host_label, d.host), ("DCGM_FI_DRIVER_VERSION", DRIVER)]
        if d.pod:
            if spelling == "compat":
                pairs += [
                    ("container_name", d.container),
                    ("pod_name", d.pod),
                    ("pod_namespace", d.namespace),
                ]
            else:
                pairs += [("container", d.container), ("namespace", d.namespace), ("pod", d.pod)]
        lbl = _labels(pairs)
        v = d.value(scrape)
        if not d.profile:  # DCGM does not report GPU_UTIL per MIG slice
            util.append(f"DCGM_FI_DEV_GPU_UTIL{lbl} {round(v)}")
        prof.append(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{lbl} {v / 100:.6f}")
        fb.append(f"DCGM_FI_DEV_FB_USED{lbl} {1024 if v else 0}")
    out = []
    for name, help_, rows in (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", util),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", fb),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", prof),
    ):
        if rows:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", *rows]
    return "\n".join(out) + "\n"


def ksm_text(pods: Iterable[KsmPod], namespaces: dict[str, str | None]) -> str:
    """Return kube-state-metrics text for pods and namespaces (namespace → team label or None)."""
    pods = list(pods)
    info, owner, phase, req, nsl = [], [], [], [], []
    for p in pods:
        base = [("namespace", p.namespace), ("pod", p.pod), ("uid", p.uid)]
        info.append(
            "kube_pod_info"
            + _labels(
                [
                    *base,
                    ("host_ip", "10.0.0.1"),
                    ("pod_ip", "10.1.0.1"),
                    ("node", p.node),
                    ("created_by_kind", p.owner_kind or "<none>"),
                    ("created_by_name", p.owner_name or "<none>"),
                    ("priority_class", p.priority_class),
                    ("host_network", "false"),
                ]
            )
            + " 1"
        )
        if p.owner_kind:
            o = [("owner_kind", p.owner_kind), ("owner_name", p.owner_name), ("owner_is_controller", "true")]
        else:
            o = [("owner_kind", "<none>"), ("owner_name", "<none>"), ("owner_is_controller", "<none>")]
        owner.append("kube_pod_owner" + _labels([*base, *o]) + " 1")
        for ph in PHASES:
            phase.append("kube_pod_status_phase" + _labels([*base, ("phase", ph)]) + f" {int(ph == p.phase)}")
        req.append(
            "kube_pod_container_resource_requests"
            + _labels(
                [
                    *base,
                    ("container", "main"),
                    ("node", p.node),
                    ("resource", "nvidia_com_gpu"),
                    ("unit", "integer"),
                ]
            )
            + f" {p.gpus}"
        )
    for ns, team in namespaces.items():
        extra = [("label_team", team)] if team else []
        nsl.append("kube_namespace_labels" + _labels([("namespace", ns), *extra]) + " 1")
    out = []
    for name, rows in (
        ("kube_pod_info", info),
        ("kube_pod_owner", owner),
        ("kube_pod_status_phase", phase),
        ("kube_pod_container_resource_requests", req),
        ("kube_namespace_labels", nsl),
    ):
        out += [f"# HELP {name} {name}", f"# TYPE {name} gauge", *rows]
    return "\n".join(out) + "\n"
