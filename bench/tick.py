"""One evaluation tick over a large cluster: QueueEvaluator.evaluate vs plain dict loops over every pod.

The state holds 150,000 pods (20,000 of them pending: PaddleJob gangs, partial gangs, batch Jobs, bare
pods; plus preemption victims). Pods are built as domain records directly so that setup stays short;
the reference holds the same pods as raw dicts (API-shaped: metadata/spec/status) and does the same work
the naive way: walk all pods, group, parse each message, sum GPUs per node.

    .venv/bin/python bench/tick.py [--pods 150000] [--pending 20000] [--runs 15]

Prints the median of each and their ratio. Target (DESIGN §8): <= 50 ms median with 20,000 pending.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections import defaultdict
from typing import Any

from msgspec.structs import replace

from watchtower.config.model import Settings
from watchtower.domain.messages import parse_scheduling_message
from watchtower.domain.model import Condition, Node, OwnerRef, Pod
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.state import ClusterState

NOW = 1_800_000_000.0
PRIORITIES = [
    (1_000_000, "urgent-debug"),
    (900_000, "online-serving"),
    (500_000, "experiment"),
    (100_000, "batch"),
]
MESSAGES = [
    "0/{n} nodes are available: {a} Insufficient nvidia.com/gpu, {b} node(s) had untolerated taint "
    "{{nvidia.com/maintenance: true}}. preemption: 0/{n} nodes are available: {a} No preemption victims found "
    "for incoming pod, {b} Preemption is not helpful for scheduling.",
    "0/{n} nodes are available: {n} Insufficient nvidia.com/gpu. preemption: 0/{n} nodes are available: "
    "{n} Preemption is not helpful for scheduling.",
    "0/{n} nodes are available: {a} Insufficient cpu, {b} node(s) didn't match Pod's node affinity/selector. "
    "preemption: not eligible due to preemptionPolicy=Never.",
]


def build(n_pods: int, n_pending: int, seed: int = 1) -> tuple[list[Pod], list[Node]]:
    rnd = random.Random(seed)
    n_nodes = 2000
    nodes = [
        Node(f"gpu-{i:04d}", gpus=8, cpu_millis=96_000, memory_bytes=768 << 30, pods=110)
        for i in range(n_nodes)
    ]
    msgs = [
        m.format(n=n_nodes, a=a, b=n_nodes - a) for m in MESSAGES for a in range(1900, 2000, 5)
    ]  # 60 distinct texts, as a real queue shows a handful of wordings with changing counts
    pods: list[Pod] = []
    uid = 0

    def new(
        ns: str, name: str, *, owner: OwnerRef | None, pending: bool, gpus: int, prio: tuple[int, str]
    ) -> Pod:
        nonlocal uid
        uid += 1
        created = NOW - rnd.uniform(60, 3 * 86400)
        common = {
            "uid": f"uid-{uid:07d}",
            "namespace": ns,
            "name": name,
            "created": created,
            "priority": prio[0],
            "priority_class": prio[1],
            "gpus": gpus,
            "cpu_millis": 8000,
            "memory_bytes": 64 << 30,
            "owner": owner,
            "images": ("paddlepaddle/paddle:2.6.1-gpu",),
        }
        if pending:
            msg = rnd.choice(msgs)
            return Pod(
                **common,
                scheduled=Condition("False", "Unschedulable", msg, created + 1),
                nominated_node=rnd.choice(["", "", "", "gpu-0001"]),
            )
        node = nodes[rnd.randrange(n_nodes)].name
        return Pod(
            **common,
            phase="Running",
            node=node,
            scheduled=Condition("True", "", "", created + 5),
            start_time=created + 6,
            running_since=created + 60,
        )

    pending = 0
    i = 0
    while pending < n_pending:
        i += 1
        ns = f"team-{i % 200:03d}"
        prio = rnd.choice(PRIORITIES)
        shape = rnd.random()
        if shape < 0.35:  # PaddleJob gang, fully pending or partial
            size = rnd.choice([2, 4, 8])
            placed = rnd.choice([0, 0, size // 2])
            owner = OwnerRef("PaddleJob", f"pj-{i}", "batch.paddlepaddle.org/v1", f"pj-uid-{i}")
            for w in range(size):
                p = new(ns, f"pj-{i}-worker-{w}", owner=owner, pending=w >= placed, gpus=8, prio=prio)
                pods.append(p)
                pending += p.waiting
        elif shape < 0.6:
            owner = OwnerRef("Job", f"job-{i}", "batch/v1", f"job-uid-{i}")
            pods.append(
                new(ns, f"job-{i}-x{i}", owner=owner, pending=True, gpus=rnd.choice([1, 2, 4]), prio=prio)
            )
            pending += 1
        else:
            pods.append(
                new(ns, f"pod-{i}", owner=None, pending=True, gpus=rnd.choice([1, 2, 4, 8]), prio=prio)
            )
            pending += 1
    while len(pods) < n_pods:
        i += 1
        ns = f"team-{i % 200:03d}"
        owner = OwnerRef("PaddleJob", f"run-{i // 8}", "batch.paddlepaddle.org/v1", f"run-uid-{i // 8}")
        pods.append(
            new(
                ns,
                f"run-{i // 8}-worker-{i % 8}",
                owner=owner,
                pending=False,
                gpus=rnd.choice([0, 1, 8]),
                prio=rnd.choice(PRIORITIES),
            )
        )
    # A few hundred preemption victims, still terminating.
    for k in range(0, len(pods), 400):
        p = pods[k]
        if p.node:
            pods[k] = replace(
                p,
                disruption=Condition("True", "PreemptionByScheduler", "", NOW - 600),
                deleted_at=NOW - 600,
            )
    return pods, nodes


def as_raw(p: Pod) -> dict[str, Any]:
    """The reference's pods: API-shaped dicts with just the fields the work reads."""
    conds = []
    if p.scheduled is not None:
        conds.append(
            {
                "type": "PodScheduled",
                "status": p.scheduled.status,
                "reason": p.scheduled.reason,
                "message": p.scheduled.message,
            }
        )
    if p.disruption is not None:
        conds.append({"type": "DisruptionTarget", "status": "True", "reason": p.disruption.reason})
    meta: dict[str, Any] = {"uid": p.uid, "namespace": p.namespace, "name": p.name, "created": p.created}
    if p.owner is not None:
        meta["ownerReferences"] = [{"kind": p.owner.kind, "name": p.owner.name}]
    return {
        "metadata": meta,
        "spec": {"nodeName": p.node, "priority": p.priority, "gpus": p.gpus},
        "status": {"phase": p.phase, "conditions": conds, "nominatedNodeName": p.nominated_node},
    }


def naive_tick(raw_pods: list[dict[str, Any]], raw_nodes: list[dict[str, Any]], now: float) -> int:
    """The same answers by walking every pod: waiting workloads, why, GPUs held, fragmentation."""
    used: dict[str, int] = defaultdict(int)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    preempted = []
    for p in raw_pods:
        m, spec, st = p["metadata"], p["spec"], p["status"]
        if spec["nodeName"] and st["phase"] not in ("Succeeded", "Failed"):
            used[spec["nodeName"]] += spec["gpus"]
        refs = m.get("ownerReferences")
        key = (
            (m["namespace"], refs[0]["kind"], refs[0]["name"]) if refs else (m["namespace"], "Pod", m["name"])
        )
        groups[key].append(p)
        for c in st["conditions"]:
            if c["type"] == "DisruptionTarget" and c["reason"] == "PreemptionByScheduler":
                preempted.append(p)
    free = [max(0, n["gpus"] - used.get(n["name"], 0)) for n in raw_nodes]
    free_total, largest = sum(free), max(free)
    out = []
    for key, members in groups.items():
        queued = [p for p in members if not p["spec"]["nodeName"] and p["status"]["phase"] == "Pending"]
        if not queued:
            continue
        held = sum(p["spec"]["gpus"] for p in members if p["spec"]["nodeName"])
        oldest = min(queued, key=lambda p: p["metadata"]["created"])
        msg = next((c["message"] for c in oldest["status"]["conditions"] if c["type"] == "PodScheduled"), "")
        diag = parse_scheduling_message(msg)
        per_pod = max(p["spec"]["gpus"] for p in queued)
        frag = 0 < per_pod <= free_total and per_pod > largest
        out.append((key, now - oldest["metadata"]["created"], held, diag.preemption, frag))
    out.sort(key=lambda r: -r[1])
    return len(out) + len(preempted)


def median_ms(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()

    t0 = time.perf_counter()
    pods, nodes = build(args.pods, args.pending)
    state = ClusterState()
    for n in nodes:
        state.upsert_node(n)
    for p in pods:
        state.upsert_pod(p)
    setup = time.perf_counter() - t0
    # The service freezes the collector after its initial lists (watchtower/services/watch.py), so the
    # 150,000 records it keeps are not walked by every full collection; measure the tick the same way.
    gc.freeze()
    policy = Settings().queue_policy()
    evaluator = QueueEvaluator(policy)
    snap = evaluator.evaluate(state, now=NOW)
    waiting = sum(1 for w in snap.workloads if w.waiting)
    print(
        f"state: {len(state.pods):,} pods, {len(state.waiting):,} pending, {waiting:,} waiting workloads, "
        f"{len(snap.preemptions)} preemptions, {len(snap.fragmentation)} fragmented (setup {setup:.1f}s)"
    )

    domain = median_ms(lambda: evaluator.evaluate(state, now=NOW), args.runs)
    # A live tick follows some churn: 1% of the pending pods got a new scheduler message since the last one.
    pending = [p for p in pods if p.waiting]
    rnd = random.Random(2)

    def churned_tick() -> None:
        for p in rnd.sample(pending, len(pending) // 100):
            assert p.scheduled is not None
            msg = p.scheduled.message.replace("0/2000", "0/1999")
            state.upsert_pod(
                replace(p, scheduled=Condition("False", "Unschedulable", msg, p.scheduled.since))
            )
        t0 = time.perf_counter()
        evaluator.evaluate(state, now=NOW)
        churn_times.append((time.perf_counter() - t0) * 1000)

    churn_times: list[float] = []
    for _ in range(args.runs):
        churned_tick()
    churn = statistics.median(churn_times)
    cold = median_ms(lambda: QueueEvaluator(policy).evaluate(state, now=NOW), 3)
    raw_pods = [as_raw(p) for p in pods]
    raw_nodes = [{"name": n.name, "gpus": n.gpus} for n in nodes]
    naive = median_ms(lambda: naive_tick(raw_pods, raw_nodes, NOW), args.runs)
    print(
        f"QueueEvaluator.evaluate   median {domain:8.1f} ms over {args.runs} runs, state unchanged (target <= 50 ms)"
    )
    print(f"  after 1% pending churn   median {churn:8.1f} ms over {args.runs} runs")
    print(f"  cold (new evaluator)     median {cold:8.1f} ms over 3 runs")
    print(f"reference: dict loops     median {naive:8.1f} ms over {args.runs} runs")
    print(f"ratio domain/reference    {domain / naive:.2f}")


if __name__ == "__main__":
    main()
