"""Synthetic, realistic pod JSON for the benchmarks, and a small API server process that serves it.

Pods are built with watchtower.simulator.objects and given what real pods carry and Watchtower never
reads: managedFields, env vars, volumes and mounts, probes, annotations, podIPs, more conditions. Each
pod serialises to about 4 KB, as PaddleJob pods on a production cluster do.

    python bench/_podgen.py serve --port-file F --pods N [--page 500] [--watch-events M]

serves GET /api/v1/pods in pages (`limit`/`continue`) and, with --watch-events, one watch stream of M
ADDED/MODIFIED events (one HTTP chunk each, as the API server sends them); later watches stay open and idle.
It runs as its own process so that its memory and CPU do not count against the client being measured.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from watchtower.simulator import objects as o

T0 = 1_800_000_000.0
TEAMS = ["vision", "nlp", "speech", "recsys", "ads", "search", "rl", "multimodal"]
CLASSES = [
    (1_000_000, "urgent-debug"),
    (900_000, "online-serving"),
    (500_000, "experiment"),
    (100_000, "batch"),
]
MESSAGE = (
    "0/1200 nodes are available: 1150 Insufficient nvidia.com/gpu, 50 node(s) had untolerated taint "
    "{nvidia.com/maintenance: true}. preemption: 0/1200 nodes are available: 1200 No preemption victims "
    "found for incoming pod."
)


def _managed_fields(t: str) -> list[dict[str, Any]]:
    spec_fields = {
        f"f:{k}": {} for k in ("dnsPolicy", "enableServiceLinks", "restartPolicy", "schedulerName")
    }
    return [
        {
            "manager": "paddle-operator",
            "operation": "Update",
            "apiVersion": "v1",
            "time": t,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:labels": {f"f:{k}": {} for k in ("app", "paddle-res-name", "paddle-res-type", "team")},
                    "f:ownerReferences": {'k:{"uid":"x"}': {}},
                },
                "f:spec": {
                    "f:containers": {'k:{"name":"paddle"}': {".": {}, "f:env": {}, "f:image": {}}},
                    **spec_fields,
                },
            },
        },
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": "v1",
            "time": t,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        ".": {},
                        'k:{"type":"PodScheduled"}': {
                            ".": {},
                            "f:lastProbeTime": {},
                            "f:lastTransitionTime": {},
                            "f:message": {},
                            "f:reason": {},
                            "f:status": {},
                            "f:type": {},
                        },
                    }
                }
            },
            "subresource": "status",
        },
    ]


def pod(i: int, rng: random.Random, *, resource_version: int = 1) -> dict[str, Any]:
    """Return the i-th synthetic pod: a PaddleJob worker, pending or running."""
    team = TEAMS[i % len(TEAMS)]
    prio, pclass = CLASSES[rng.randrange(len(CLASSES))]
    job = f"{team}-train-{i // 8:06d}"
    name = f"{job}-worker-{i % 8}"
    created = T0 - rng.uniform(0, 86400)
    running = rng.random() < 0.8
    node = f"gpu-node-{rng.randrange(1200):04d}"
    conds = (
        [
            o.scheduled(created + 5),
            o.condition("Initialized", "True", created + 6),
            o.condition("Ready", "True", created + 60),
            o.condition("ContainersReady", "True", created + 60),
        ]
        if running
        else [o.unschedulable(created + 1, MESSAGE)]
    )
    p = o.pod(
        name=name,
        namespace=f"team-{team}",
        created=created,
        uid=o.new_uid(f"bench/{i}"),
        gpus=rng.choice((1, 2, 4, 8)),
        cpu="16",
        memory="128Gi",
        priority=prio,
        priority_class=pclass,
        labels={
            "app": "paddle",
            "paddle-res-name": name,
            "paddle-res-type": "worker",
            "team": team,
            "batch.kubernetes.io/job-name": job,
            "pod-template-hash": f"{rng.getrandbits(40):x}",
            "sidecar.istio.io/inject": "false",
            "app.kubernetes.io/managed-by": "paddle-operator",
        },
        annotations={
            "kubectl.kubernetes.io/restartedAt": o.ts(created) or "",
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9100",
            "cni.projectcalico.org/podIP": f"10.{i % 250}.{i // 250 % 250}.{i % 7}/32",
        },
        owner=o.owner_ref("PaddleJob", job, api_version=o.PADDLE_API, uid=o.new_uid(f"bench/job/{job}")),
        node=node if running else None,
        phase="Running" if running else "Pending",
        conditions=conds,
        start_time=created + 6 if running else None,
        running_since=created + 50 if running else None,
        resource_version=str(resource_version),
    )
    p["metadata"]["managedFields"] = _managed_fields(o.ts(created) or "")
    p["metadata"]["generateName"] = f"{job}-worker-"
    c = p["spec"]["containers"][0]
    c["name"] = "paddle"
    c["command"] = ["python", "-m", "paddle.distributed.launch", "--log_dir", "/workspace/log", "train.py"]
    c["args"] = ["--config", f"/workspace/configs/{job}.yaml", "--epochs", "90", "--batch-size", "256"]
    c["env"] = [
        {"name": f"PADDLE_{k}", "value": v}
        for k, v in (
            ("TRAINER_ID", str(i % 8)),
            ("TRAINERS_NUM", "8"),
            ("JOB_ID", job),
            ("PORT", "2379"),
            ("MASTER", f"{job}-ps-0:2379"),
            ("TRAINER_ENDPOINTS", ",".join(f"{job}-worker-{k}:2379" for k in range(4))),
            ("USE_CUDA", "1"),
            ("NCCL_DEBUG", "INFO"),
        )
    ]
    c["env"].append(
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}
    )
    c["volumeMounts"] = [{"name": v, "mountPath": f"/{v}"} for v in ("dshm", "datasets", "checkpoints")] + [
        {
            "name": "kube-api-access-x",
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "readOnly": True,
        }
    ]
    c["ports"] = [{"containerPort": 2379, "name": "master", "protocol": "TCP"}]
    p["spec"]["volumes"] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        {"name": "datasets", "persistentVolumeClaim": {"claimName": f"{team}-datasets", "readOnly": True}},
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": f"{team}-ckpt"}},
        {
            "name": "kube-api-access-x",
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                ],
            },
        },
    ]
    p["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    p["spec"]["securityContext"] = {}
    if running:
        p["status"]["podIP"] = f"10.{i % 250}.{i // 250 % 250}.{i % 7}"
        p["status"]["podIPs"] = [{"ip": p["status"]["podIP"]}]
    return p


IDX = b"@@IDX@@"
TEMPLATES = 1000


def _templates(seed: int) -> list[bytes]:
    """Serialised pods with `@@IDX@@` where each copy's own index goes (uid, names), so copies are cheap."""
    rng = random.Random(seed)
    out = []
    for i in range(TEMPLATES):
        p = pod(i, rng)
        m = p["metadata"]
        m["uid"] = "00000000-0000-4000-8000-@@IDX@@"
        m["name"] = m["name"].replace("-worker-", "-@@IDX@@-worker-")
        out.append(orjson.dumps(p))
    return out


def pod_bytes(n: int, seed: int = 1) -> list[bytes]:
    """Return n distinct pods (distinct uid and name) as JSON, ~4 KB each."""
    ts = _templates(seed)
    return [ts[i % TEMPLATES].replace(IDX, b"%012d" % i) for i in range(n)]


def pages(n: int, page: int, seed: int = 1) -> list[bytes]:
    """Return the LIST response bodies for n pods in pages of `page`, with continue tokens."""
    items = pod_bytes(n, seed)
    out = []
    for start in range(0, n, page):
        meta: dict[str, Any] = {"resourceVersion": "1000"}
        if start + page < n:
            meta["continue"] = f"p{start + page}"
        head = b'{"kind":"PodList","apiVersion":"v1","metadata":' + orjson.dumps(meta) + b',"items":['
        out.append(head + b",".join(items[start : start + page]) + b"]}")
    return out


def watch_lines(n: int, seed: int = 2) -> list[bytes]:
    """Return n watch event lines: ADDED for 2,000 new pods, then MODIFIED for them, resourceVersions rising."""
    base = pod_bytes(min(n, 2000), seed)
    rv = b'"resourceVersion":"1"'
    out = []
    for k in range(n):
        typ = b"ADDED" if k < len(base) else b"MODIFIED"
        obj = base[k % len(base)].replace(rv, b'"resourceVersion":"%d"' % (2000 + k), 1)
        out.append(b'{"type":"' + typ + b'","object":' + obj + b"}")
    return out


def serve(port_file: Path, n: int, page: int, watch_events: int) -> None:
    bodies = (
        pages(n, page)
        if n
        else [
            orjson.dumps(
                {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
            )
        ]
    )
    lines = watch_lines(watch_events) if watch_events else []
    state = {"watched": False}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            q = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
            if q.get("watch") == "true":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if not state["watched"] and lines:
                    state["watched"] = True
                    w = self.wfile
                    for ln in lines:
                        w.write(b"%x\r\n%s\n\r\n" % (len(ln) + 1, ln))
                    w.write(b"0\r\n\r\n")
                    w.flush()
                    return
                time.sleep(3600)  # idle watch: the client cancels
                return
            cont = q.get("continue", "")
            idx = int(cont[1:]) // page if cont else 0
            body = bodies[idx]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    port_file.write_text(str(httpd.server_address[1]))
    httpd.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["serve"])
    ap.add_argument("--port-file", type=Path, required=True)
    ap.add_argument("--pods", type=int, default=0)
    ap.add_argument("--page", type=int, default=500)
    ap.add_argument("--watch-events", type=int, default=0)
    a = ap.parse_args()
    serve(a.port_file, a.pods, a.page, a.watch_events)


if __name__ == "__main__":
    main()
