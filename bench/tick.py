"""One evaluation tick over a large cluster: QueueEvaluator.evaluate and the QueueTracker's tick vs dict loops.

The state holds 150,000 pods (20,000 of them pending: PaddleJob gangs, partial gangs, batch Jobs, bare
pods; plus preemption victims) and beside them (issue 12) 2,000 upstream PodGroups, 2,000 PaddleJobs
(some with no pod yet, some with a Volcano PodGroup) and 1,000 JobSets (a third of them a TrainJob's),
whose pods are among the 150,000 (bench/_kinds.py). Everything is built as domain records directly so
that setup stays short; the reference holds the same objects as raw dicts (API-shaped) and does the same
work the naive way: walk all pods, group, parse each message, sum GPUs per node; then the gangs and jobs
against the pods that exist, each tier's head tried on every node, a start estimate per waiting workload.

The tick of QueueTracker.evaluate (services/queue_tracker.py) is the service's: the evaluation plus stuck tier heads,
the tiers' recent waits, quotas, gauges, running work per tier, and while urgent work is stuck the GPU
holders below it (all of these follow the state's change log: the first tick walks every pod, shown apart).
The priority-inversion rule is timed over that tick's holders (alerting runs it once a tick).

Beside them (issue 13) 20,000 pods asking GPUs only through DRA ResourceClaims on 2,000 DRA-only nodes'
ResourceSlices (bench/_dra.py); the churn then also republishes 1% of the slices. `--compare-dra` runs the
whole benchmark twice back to back, with `--dra 0` and with the DRA pods, and prints both with their
references.

Beside them (issue 30) the preemption-outcome bookkeeping: 2,000 preemptors open at once (2 victims each), 100
binding a tick (half where their victims were), 50 other pods binding on victims' nodes, and the rest resolved by
`queue.preemption_outcome_window` as the clock moves; printed beside the churned tick without them.

And (issue 30) 10,000 gated pods in 2,500 Kueue plain-pod groups, each group held for quota with its pending
Workload (bench/_gated.py), beside the 150,000: a group and its Workload are one waiting workload. The churn
leaves them gated (Kueue's hold changes no pod); the memory figure decodes 2,500 groups from API JSON.

    .venv/bin/python bench/tick.py [--pods 150000] [--pending 20000] [--runs 15] [--no-kinds] [--dra 20000]
        [--gated 2500]
    .venv/bin/python bench/tick.py --compare-dra

Prints the medians unchanged and after churn, the reference, and their ratio. Target (DESIGN §8, issue
12): <= 50 ms median with 20,000 pending and the gangs and jobs beside them.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from _dra import build_dra, load_dra
from _gated import GatedKinds, build_gated, naive_gated, raw_gated, traced_bytes_per_gated_object
from _kinds import Kinds, build_kinds, naive_extras, raw_kinds
from _kueue import KueueKinds, build_kueue, load_kueue, naive_kueue, raw_workloads, traced_bytes_per_workload
from msgspec.structs import replace

from watchtower.api.documents import QueueDocuments
from watchtower.bootstrap import object_decoder
from watchtower.config.model import Settings
from watchtower.domain.alerts.rules import priority_inversion
from watchtower.domain.alerts.rules.base import RuleInput
from watchtower.domain.disruptions import Preemption
from watchtower.domain.fairness.record import RecordedState, RecordPolicy, record_tick
from watchtower.domain.forms.gangs.records import GroupRef
from watchtower.domain.health import HEALTHY
from watchtower.domain.messages.scheduler import parse_scheduling_message
from watchtower.domain.preemption_outcome import OutcomeBook
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.records import Condition, Node, OwnerRef, Pod
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import JOBSET_NAME_LABEL
from watchtower.ports import QueueGauges
from watchtower.services.alerting.evaluation import rule_settings
from watchtower.services.queue_tracker import QueueTracker

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


def build(
    n_pods: int, n_pending: int, seed: int = 1, *, kinds: bool = True, kueue: int = 0, gated: int = 0
) -> tuple[list[Pod], list[Node], Kinds, KueueKinds, GatedKinds]:
    """Return the pods (the gangs' and jobs' among them, counted in n_pods and n_pending; the gated groups'
    beside them), nodes, records."""
    rnd = random.Random(seed)
    n_nodes = 2000
    nodes = [
        Node(f"gpu-{i:04d}", gpus=8, cpu_millis=96_000, memory_bytes=768 << 30, pods=110)
        for i in range(n_nodes)
    ]
    if kinds:
        # A few empty nodes, listed last: each tier's head fits on one only after a walk of all the full
        # ones (the stuck-heads check's worst case), and stays stuck there.
        nodes += [
            Node(f"gpu-free-{i}", gpus=8, cpu_millis=96_000, memory_bytes=768 << 30, pods=110)
            for i in range(10)
        ]
    msgs = [
        m.format(n=n_nodes, a=a, b=n_nodes - a) for m in MESSAGES for a in range(1900, 2000, 5)
    ]  # 60 distinct texts, as a real queue shows a handful of wordings with changing counts
    pods: list[Pod] = []
    uid = 0

    def new(
        ns: str,
        name: str,
        *,
        owner: OwnerRef | None,
        pending: bool,
        gpus: int,
        prio: tuple[int, str],
        labels: Mapping[str, str] | None = None,
        group: GroupRef | None = None,
        said: bool = True,
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
            "labels": labels or {},
            "group": group,
        }
        if pending:
            msg = rnd.choice(msgs)
            return Pod(
                **common,
                # An incomplete upstream gang's pods wait in PreEnqueue: no condition at all (DESIGN §3.14).
                scheduled=Condition("False", "Unschedulable", msg, created + 1) if said else None,
                nominated_node=rnd.choice(["", "", "", "gpu-0001"]) if said else "",
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

    made = build_kinds(rnd, new, msgs, PRIORITIES, NOW) if kinds else Kinds()
    pods.extend(made.pods)
    queued = build_kueue(rnd, new, NOW, workloads=kueue) if kueue else KueueKinds()
    pods.extend(queued.pods)  # the admitted Workloads' Jobs' pods, among the n_pods
    pending = sum(p.waiting for p in pods)
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
    held = build_gated(rnd, new, NOW, groups=gated) if gated else GatedKinds()
    pods.extend(held.pods)
    # A few hundred preemption victims, still terminating.
    for k in range(0, len(pods), 400):
        p = pods[k]
        if p.node:
            pods[k] = replace(
                p,
                disruption=Condition("True", "PreemptionByScheduler", "", NOW - 600),
                deleted_at=NOW - 600,
            )
    return pods, nodes, made, queued, held


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
                "at": p.scheduled.since,
            }
        )
    if p.disruption is not None:
        conds.append({"type": "DisruptionTarget", "status": "True", "reason": p.disruption.reason})
    meta: dict[str, Any] = {"uid": p.uid, "namespace": p.namespace, "name": p.name, "created": p.created}
    if p.owner is not None:
        meta["ownerReferences"] = [{"kind": p.owner.kind, "name": p.owner.name}]
    if p.labels:
        meta["labels"] = dict(p.labels)
    spec: dict[str, Any] = {
        "nodeName": p.node,
        "priority": p.priority,
        "priorityClassName": p.priority_class,
        "gpus": p.gpus,
        "cpu": p.cpu_millis,
        "memory": p.memory_bytes,
    }
    if p.group is not None:
        spec["schedulingGroup"] = {"podGroupName": p.group.name}
    return {
        "metadata": meta,
        "spec": spec,
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
        jobset = m["labels"].get(JOBSET_NAME_LABEL) if "labels" in m else None
        group = spec.get("schedulingGroup")
        if jobset:
            key = (m["namespace"], "JobSet", jobset)
        elif refs:
            key = (m["namespace"], refs[0]["kind"], refs[0]["name"])
        elif group:
            key = (m["namespace"], "PodGroup", group["podGroupName"])
        else:
            key = (m["namespace"], "Pod", m["name"])
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


class NullMetrics:
    """The QueueTracker's metrics port, recording nothing: the bench times the evaluation, not Prometheus."""

    def scheduled(self, tier: str, wait: float) -> None: ...
    def started(self, tier: str, latency: float) -> None: ...
    def preempted(self, victim_tier: str, preemptor_tier: str, gpu_hours_lost: float | None) -> None: ...
    def preempted_between_teams(self, victim_team: str, preemptor_team: str, lost: float | None) -> None: ...
    def preemptor_running(self, tier: str, latency: float) -> None: ...
    def preemption_judged(self, pt: str, vt: str, outcome: str, reason: str, lost: float | None) -> None: ...
    def preemption_unjudged(self, reason: str) -> None: ...
    def disrupted(self, reason: str, tier: str) -> None: ...
    def skipped_object(self, kind: str) -> None: ...
    def left_out(self, kind: str, reason: str) -> None: ...
    def evaluated(self, gauges: QueueGauges, duration: float) -> None: ...
    def consumer_failed(self, consumer: str) -> None: ...


class FixedClock:
    def now(self) -> float:
        return NOW


def loaded_tracker(
    n_pods: int, n_pending: int, *, kinds: bool = True, kueue: int = 20_000, gated: int = 0
) -> tuple[QueueTracker, list[Pod], list[Node], Kinds, KueueKinds, GatedKinds]:
    """Return the service's QueueTracker over a state built and loaded as above, with what it was built from:
    the one set-up every bench of the tick at scale shares (bench/namespace.py, fairness_record.py, ...)."""
    pods, nodes, built_kinds, built_kueue, held = build(
        n_pods, n_pending, kinds=kinds, kueue=kueue, gated=gated
    )
    settings = Settings()
    tracker = QueueTracker(
        settings=settings,
        clock=FixedClock(),
        metrics=NullMetrics(),
        decoder=object_decoder(settings),
        source_health=lambda: HEALTHY,
    )
    load(tracker.state, pods, nodes, built_kinds, built_kueue, held)
    return tracker, pods, nodes, built_kinds, built_kueue, held


def load(
    state: ClusterState,
    pods: list[Pod],
    nodes: list[Node],
    kinds: Kinds,
    kueue: KueueKinds | None = None,
    gated: GatedKinds | None = None,
) -> None:
    """Apply everything to the state in the order the service lists its kinds: pods last."""
    for n in nodes:
        state.upsert_node(n)
    for q in kinds.quotas:
        state.control.upsert_quota(q)
    for c in kinds.controllers:
        state.control.upsert_controller(c)
    for g in kinds.volcano_groups:
        state.forms.gangs.upsert_volcano_group(g)
    for g in kinds.pod_groups:
        state.forms.gangs.upsert_pod_group(g)
    if kueue is not None:
        load_kueue(state, kueue)
    for w in gated.workloads if gated is not None else ():
        state.forms.kueue.upsert_workload(w)
    for p in pods:
        state.upsert_pod(p)


def compare_dra(args: argparse.Namespace) -> None:
    """Run the benchmark without and with the DRA pods, one after the other, each in a fresh process."""
    import re
    import subprocess
    import sys

    base = [sys.executable, __file__, "--pods", str(args.pods), "--pending", str(args.pending)]
    base += ["--runs", str(args.runs)] + (["--no-kinds"] if args.no_kinds else [])
    wanted = {
        "tick": r"^QueueTracker\.evaluate +median +([\d.]+)",
        "churn": r"^  after 1% churn +median +([\d.]+)",
        "binds": r"^  after churn \+ 100 binds, 100 finishes median +([\d.]+)",
        "reference": r"together ([\d.]+) ms|^reference: dict loops +median +([\d.]+)",
        "memory": r"^DRA memory +(\d+) B",
    }
    rows: dict[int, dict[str, str]] = {}
    for dra in (0, args.dra):
        out = subprocess.run([*base, "--dra", str(dra)], capture_output=True, text=True, check=True).stdout
        print(out, end="")
        got: dict[str, str] = {}
        for key, pattern in wanted.items():
            for line in out.splitlines():
                m = re.search(pattern, line)
                if m:
                    got[key] = next(g for g in m.groups() if g)  # the last match wins: the service's churn
        rows[dra] = got
    print()
    print(
        f"{'DRA pods':>9} {'tick':>9} {'churn':>9} {'+binds':>9} {'reference':>10} {'churn/ref':>9}  memory"
    )
    for dra, got in rows.items():
        ratio = float(got["churn"]) / float(got["reference"])
        print(
            f"{dra:>9,} {got['tick']:>9} {got['churn']:>9} {got['binds']:>9} {got['reference']:>10} "
            f"{ratio:>9.3f}  {got.get('memory', '-')} B per DRA object"
        )


def preemption_outcomes(
    tracker: QueueTracker, nodes: list[Node], n: int, runs: int, churn: Any
) -> tuple[float, float, int, float]:
    """Time the tick with `n` preemptors open (2 victims each, on GPU nodes), 100 of them binding a tick (half
    where their victims were), 50 other pods binding on victims' nodes, and the window resolving the rest as
    the clock moves a second a tick; return the tick's median, the median of its outcome step (the ledger's
    settle, timed apart), the outcomes reached and the bytes per open one."""
    if not n:
        return 0.0, 0.0, 0, 0.0
    state = tracker.state
    window = tracker.policy.preemption_outcome_window
    gpu_nodes = [x.name for x in nodes if x.gpus]
    open_pods = []
    for i in range(n):
        node = gpu_nodes[i % len(gpu_nodes)]
        pre = Pod(
            uid=f"bench-preemptor-{i}",
            namespace="bench-urgent",
            name=f"urgent-{i}",
            created=NOW - window,
            priority=1_000_000,
            priority_class="urgent-debug",
            gpus=4,
            nominated_node=node,
        )
        state.upsert_pod(pre)
        open_pods.append(pre)
        # Spread over the runs: each tick's second takes some of them past the window.
        at = NOW - window + 1 + i % runs
        for v in range(2):
            state.ledger.record(
                Preemption(
                    victim_uid=f"bench-victim-{i}-{v}",
                    victim_namespace="bench-low",
                    victim_name=f"low-{i}-{v}",
                    at=at,
                    node=node,
                    victim_priority=100_000,
                    victim_gpus=2,
                    victim_started=NOW - 7200,
                    preemptor_uid=pre.uid,
                    preemptor_namespace=pre.namespace,
                    preemptor_name=pre.name,
                    reason="PreemptionByScheduler",
                )
            )
    tracker.evaluate(NOW)
    rnd = random.Random(30)
    times = []
    settles = []
    resolved = 0
    for t in range(1, runs + 1):
        churn()
        for k in range(100):
            pre = open_pods.pop()
            node = pre.nominated_node if k % 2 else rnd.choice(gpu_nodes)
            bound = Condition("True", "", "", NOW + t)
            state.upsert_pod(replace(pre, node=node, phase="Running", scheduled=bound))
        for k in range(50):
            node = gpu_nodes[rnd.randrange(len(gpu_nodes))]
            taker = Pod(
                uid=f"bench-taker-{t}-{k}",
                namespace="bench-other",
                name=f"other-{t}-{k}",
                created=NOW,
                gpus=2,
                node=node,
                phase="Running",
                scheduled=Condition("True", "", "", NOW + t),
            )
            state.upsert_pod(taker)
        before = len(state.ledger.outcomes.resolved)
        t0 = time.perf_counter()
        # The tick's first step, timed apart here (the tick's own call then finds nothing left to settle).
        judged, _ = state.ledger.settle(NOW + t, window)
        for p in judged:
            tracker.preemptions.judged(p)
        t1 = time.perf_counter()
        tracker.evaluate(NOW + t)
        times.append((time.perf_counter() - t0) * 1000)
        settles.append((t1 - t0) * 1000)
        resolved += len(state.ledger.outcomes.resolved) - before
    # What an open preemptor keeps, in a book of its own.
    tracemalloc.start()
    book = OutcomeBook()
    for i in range(n):
        for v in range(2):
            book.track(
                f"victim-{i}-{v}",
                preemptor_uid=f"preemptor-{i}",
                preemptor_ref="",
                node=gpu_nodes[i % len(gpu_nodes)],
                at=NOW + i,
                judged=True,
                pods={},
            )
    kept, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), statistics.median(settles), resolved, kept / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-kinds", action="store_true", help="pods only, as before issue 12")
    ap.add_argument("--dra", type=int, default=20_000, help="pods asking GPUs only through DRA claims")
    ap.add_argument(
        "--compare-dra",
        action="store_true",
        help="run twice back to back, with --dra 0 and with --dra N, and print both beside their references",
    )
    ap.add_argument("--kueue", type=int, default=20_000, help="Kueue Workloads beside the pods (issue 13)")
    ap.add_argument(
        "--preemptions", type=int, default=2_000, help="preemptors open at once, 2 victims each (issue 30)"
    )
    ap.add_argument(
        "--gated",
        type=int,
        default=2_500,
        help="Kueue plain-pod groups of 4 gated pods beside them (issue 30)",
    )
    args = ap.parse_args()
    if args.compare_dra:
        compare_dra(args)
        return

    t0 = time.perf_counter()
    tracker, pods, nodes, kinds, kueue, held = loaded_tracker(
        args.pods, args.pending, kinds=not args.no_kinds, kueue=args.kueue, gated=args.gated
    )
    settings = tracker.settings
    state = tracker.state
    dra = build_dra(random.Random(13), args.dra, NOW)
    load_dra(state, dra)
    pods = [*pods, *dra.pods]
    policy = tracker.policy
    # As the service does after its first full list: the recent bindings are the estimates' history.
    tiers = policy.tiers
    tracker.history.seed(
        (p for p in pods if policy.selector.matches(p)),
        tier_of=lambda p: tiers.tier_of(p.priority, p.priority_class).name,
        now=NOW,
    )
    setup = time.perf_counter() - t0
    # The service freezes the collector after its initial lists (watchtower/services/queue_tracker.py), so the
    # 150,000 records it keeps are not walked by every full collection; measure the tick the same way.
    gc.freeze()
    evaluator = QueueEvaluator(policy)
    snap = evaluator.evaluate(state, now=NOW)
    waiting = [w for w in snap.workloads if w.waiting]
    sources = Counter(w.facts.source for w in waiting)
    print(
        f"state: {len(state.pods):,} pods, {len(state.waiting):,} pending, {len(waiting):,} waiting workloads "
        f"({', '.join(f'{k} {n:,}' for k, n in sorted(sources.items()))}), {len(snap.preemptions)} preemptions, "
        f"{len(snap.fragmentation)} fragmented (setup {setup:.1f}s)"
    )
    print(
        f"  beside them: {len(kinds.pod_groups):,} PodGroups, {len(kinds.paddle_jobs):,} PaddleJobs "
        f"({len(kinds.volcano_groups):,} with a Volcano PodGroup), {len(kinds.jobsets):,} JobSets "
        f"({sum(1 for c in kinds.jobsets if c.owner is not None):,} a TrainJob's), "
        f"{len(kinds.controllers) - len(kinds.paddle_jobs) - len(kinds.jobsets):,} child Jobs, "
        f"{len(kinds.quotas)} ResourceQuotas"
    )
    dra_waiting = sum(1 for p in dra.pods if p.waiting)
    print(
        f"  and {len(dra.pods):,} DRA pods ({dra_waiting:,} waiting on 'cannot allocate all claims'), "
        f"{len(dra.claims):,} ResourceClaims, {len(dra.slices):,} ResourceSlices "
        f"({sum(state.dra.node_gpus().values()):,} GPUs)"
    )
    print(
        f"  and {len(kueue.workloads):,} Kueue Workloads ({sum(w.waiting for w in kueue.workloads):,} held, no "
        f"pods; {sum(w.preempted is not None for w in kueue.workloads)} requeued after a preemption), "
        f"{len(kueue.cluster_queues)} ClusterQueues, {len(kueue.local_queues)} LocalQueues"
    )
    held_keys = {(w.namespace, w.name) for w in held.workloads}
    held_waiting = sum(
        1 for w in waiting if (w.key.namespace, w.key.name) in held_keys and w.facts.pods_gated
    )
    print(
        f"  and {len(held.pods):,} gated pods in {len(held.workloads):,} Kueue pod groups, each with its pending "
        f"Workload ({held_waiting:,} waiting workloads held by Kueue)"
    )

    domain = median_ms(lambda: evaluator.evaluate(state, now=NOW), args.runs)
    t_first = time.perf_counter()
    first = tracker.evaluate(NOW)  # the first tick builds the holder and running indexes: a walk of every pod
    first_ms = (time.perf_counter() - t_first) * 1000
    history = sum(len(w) for w in first.waits.waits.values()) if first.waits is not None else 0
    print(
        f"  the tracker's tick: {len(first.stuck)} stuck tier head(s), estimates from {history:,} recent waits"
    )
    service = median_ms(lambda: tracker.evaluate(NOW), args.runs)
    # The bench's urgent tier waits for days with preemption not helping, so every tick above also lists
    # the GPU holders for the priority-inversion rule (a walk of every bound pod); without such a stall:
    inversion = tracker._inversion_tiers
    tracker._inversion_tiers = frozenset()
    no_holders = median_ms(lambda: tracker.evaluate(NOW), args.runs)
    tracker._inversion_tiers = inversion

    def estimates() -> None:
        tick = tracker.latest
        assert tick is not None and tick.waits is not None
        for w in tick.snapshot.workloads:
            tick.waits.estimate(w)

    estimated = median_ms(estimates, args.runs)

    # The API's documents of a tick (issue 34): the display order with each workload's JSON made as asked
    # for, and the first page; beside them, making every workload's JSON (what the prebuild did each tick).
    def documents_first_page() -> None:
        tick = tracker.latest
        assert tick is not None
        QueueDocuments(tick, tiers).queue_json()

    def documents_all() -> None:
        tick = tracker.latest
        assert tick is not None
        for row in QueueDocuments(tick, tiers).rows:
            row.json  # noqa: B018 (made on first read)

    docs_page = median_ms(documents_first_page, args.runs)
    docs_all = median_ms(documents_all, 3)
    running = median_ms(lambda: tracker._running_by_tier(first.snapshot), 3)
    # The priority-inversion rule over the tick's holders, evaluated from scratch (alerting runs it in a
    # worker thread, which under the GIL still slows the loop; below, as alerting runs it, index kept).
    settings_in = rule_settings(settings)
    tick_now = tracker.evaluate(NOW)
    stuck_n = sum(1 for w in tick_now.snapshot.workloads if priority_inversion._stuck(w, inversion))
    rule_in = RuleInput(
        snapshot=tick_now.snapshot, now=NOW, tiers=tiers, settings=settings_in, holders=tick_now.holders
    )
    rule = median_ms(lambda: priority_inversion.evaluate(rule_in), 3)

    # A live tick follows some churn: 1% of the pending pods got a new scheduler message since the last
    # one, 1% of the unplaced PodGroups a new message, 1% of the waiting PaddleJobs a new status.
    # The scheduler's messages change on the pods it queues; a gated pod has none of its own.
    pending = [p for p in pods if p.waiting and p.scheduled is not None and not p.scheduling_gated]
    groups = [g for g in kinds.pod_groups if g.message]
    jobs = [c for c in kinds.paddle_jobs if c.phase != "Running"]
    rnd = random.Random(2)
    msgs = [g.message for g in groups] or [""]
    slice_names = [sl.name for sl in dra.slices]

    def churn() -> None:
        for p in rnd.sample(pending, len(pending) // 100):
            assert p.scheduled is not None
            msg = p.scheduled.message.replace("0/2000", "0/1999")
            state.upsert_pod(
                replace(p, scheduled=Condition("False", "Unschedulable", msg, p.scheduled.since))
            )
        for g in rnd.sample(groups, len(groups) // 100):
            state.forms.gangs.upsert_pod_group(replace(g, message=rnd.choice(msgs)))
        for c in rnd.sample(jobs, len(jobs) // 100):
            state.control.upsert_controller(replace(c, pods_reported=rnd.randrange(c.pods + 1)))
        # NVIDIA's driver republishing 1% of the ResourceSlices (a new pool generation, same devices).
        for name in rnd.sample(slice_names, len(slice_names) // 100):
            sl = state.dra.slices[name]
            state.forms.dra.upsert_slice(replace(sl, generation=sl.generation + 1))

    def churned(tick: Any) -> float:
        times = []
        for _ in range(args.runs):
            churn()
            t0 = time.perf_counter()
            tick()
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    churn_domain = churned(lambda: evaluator.evaluate(state, now=NOW))
    tracker.evaluate(NOW)  # catch up with the churn the evaluator alone saw
    churn_service = churned(lambda: tracker.evaluate(NOW))
    # The fairness recorder runs on every tick of every replica: its cost after the same churn.
    record_policy = RecordPolicy(
        tiers=policy.tiers, gang_stall_after=settings.alerting.rules.gang_stall_after, team_of=state.team_of
    )
    recorded, _ = record_tick(
        tracker.evaluate(NOW), RecordedState(), record_policy, present=state.by_workload.__contains__
    )
    record_times = []
    for _ in range(args.runs):
        churn()
        t = tracker.evaluate(NOW)
        t0 = time.perf_counter()
        recorded, _ = record_tick(t, recorded, record_policy, present=state.by_workload.__contains__)
        record_times.append((time.perf_counter() - t0) * 1000)
    churn_record = statistics.median(record_times)
    # Pods bound and finished too (what moves the holders and the running counts): 100 of each a tick.
    # Enough for the churned ticks below and the kept priority-inversion index's runs after them.
    to_bind = pending[-200 * args.runs :]
    del pending[-200 * args.runs :]  # not churned back to pending once bound
    to_finish = [p for p in pods if p.node and p.gpus and p.deleted_at is None][: 200 * args.runs]
    free = [n.name for n in nodes if n.name.startswith("gpu-free")] or [nodes[0].name]

    def binds() -> None:
        for _ in range(min(100, len(to_bind))):
            p = to_bind.pop()
            state.upsert_pod(replace(p, node=rnd.choice(free), phase="Running"))
        for _ in range(min(100, len(to_finish))):
            state.upsert_pod(replace(to_finish.pop(), phase="Succeeded"))

    def churned_binds() -> float:
        times = []
        for _ in range(args.runs):
            churn()
            binds()
            t0 = time.perf_counter()
            tracker.evaluate(NOW)
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    bind_service = churned_binds()

    # The priority-inversion rule as alerting runs it (issue 34): its BlockerIndex kept from tick to tick,
    # each tick after churn + 100 binds + 100 finishes; beside it the full evaluation of the same input.
    blockers = priority_inversion.BlockerIndex()

    def rule_input_now() -> RuleInput:
        t = tracker.evaluate(NOW)
        return RuleInput(
            snapshot=t.snapshot,
            now=NOW,
            tiers=tiers,
            settings=settings_in,
            holders=t.holders,
            holder_changes=t.holder_changes,
        )

    t0 = time.perf_counter()
    priority_inversion.evaluate(rule_input_now(), blockers)
    kept_first = (time.perf_counter() - t0) * 1000  # builds the index (and the tick before it)
    kept_times: list[float] = []
    full_times: list[float] = []
    update_times: list[float] = []
    for _ in range(args.runs):
        churn()
        binds()
        inp = rule_input_now()
        t0 = time.perf_counter()
        blockers.update(inp)  # alone, to say what it costs: the evaluation's own update then finds no change
        t1 = time.perf_counter()
        kept_out = priority_inversion.evaluate(inp, blockers)
        kept_times.append((time.perf_counter() - t0) * 1000)
        update_times.append((t1 - t0) * 1000)
        t0 = time.perf_counter()
        full_out = priority_inversion.evaluate(inp)
        full_times.append((time.perf_counter() - t0) * 1000)
        assert [(a.labels, a.annotations) for a in kept_out] == [(a.labels, a.annotations) for a in full_out]
    kept_rule, full_rule = statistics.median(kept_times), statistics.median(full_times)
    kept_update = statistics.median(update_times)
    outcome_service, outcome_settle, outcome_resolved, outcome_open = preemption_outcomes(
        tracker, nodes, args.preemptions, args.runs, churn
    )
    cold = median_ms(lambda: QueueEvaluator(policy).evaluate(state, now=NOW), 3)
    raw_pods = [as_raw(p) for p in pods]
    raw_nodes = [
        {"name": n.name, "gpus": n.gpus, "cpu": n.cpu_millis, "memory": n.memory_bytes} for n in nodes
    ]
    raw_kinds_ = raw_kinds(kinds)

    def tier_name(priority: int, pclass: str) -> str:
        return tiers.tier_of(priority, pclass).name

    naive = median_ms(lambda: naive_tick(raw_pods, raw_nodes, NOW), args.runs)
    extras = (
        median_ms(lambda: naive_extras(raw_pods, raw_nodes, raw_kinds_, tier_name, NOW), args.runs)
        if not args.no_kinds
        else 0.0
    )
    lqs = {(q.namespace, q.name): q.cluster_queue for q in kueue.local_queues}
    raw_kueue = raw_workloads(kueue)
    kueue_ref = (
        median_ms(lambda: naive_kueue(raw_kueue, lqs, tier_name, NOW), args.runs) if args.kueue else 0.0
    )
    raw_held = raw_gated(held)
    held_workloads = {
        (w["metadata"]["namespace"], w["metadata"]["name"]): w
        for w in raw_workloads(KueueKinds(workloads=held.workloads))
    }
    gated_ref = (
        median_ms(lambda: naive_gated(raw_held, held_workloads, lqs, tier_name, NOW), args.runs)
        if args.gated
        else 0.0
    )
    ref = naive + extras + kueue_ref + gated_ref
    r = args.runs
    print(
        f"QueueEvaluator.evaluate   median {domain:8.1f} ms over {r} runs, state unchanged (target <= 50 ms)"
    )
    print(f"  after 1% churn           median {churn_domain:8.1f} ms over {r} runs")
    print(f"  cold (new evaluator)     median {cold:8.1f} ms over 3 runs")
    print(
        f"QueueTracker.evaluate     median {service:8.1f} ms over {r} runs, state unchanged (the service's tick)"
    )
    print(f"  after 1% churn           median {churn_service:8.1f} ms over {r} runs")
    print(
        f"  + fairness record_tick   median {churn_record:8.2f} ms over {r} runs after 1% churn "
        f"({churn_record / churn_service:.1%} of the churned tick beside it)"
    )
    print(f"  no urgent work stuck     median {no_holders:8.1f} ms over {r} runs (no GPU-holders walk)")
    print(f"  after churn + 100 binds, 100 finishes median {bind_service:6.1f} ms over {r} runs")
    if args.preemptions:
        print(
            f"  after churn + 100 preemptors bound, 50 pods bound on their victims' nodes, the window passing: "
            f"median {outcome_service:6.1f} ms over {r} runs ({args.preemptions:,} preemptors open, "
            f"{outcome_resolved:,} resolved over the runs; beside it the churn + 100 binds tick above)"
        )
        print(
            f"    of it, the outcomes  median {outcome_settle:8.2f} ms over {r} runs "
            f"({outcome_settle / outcome_service:.1%} of that tick)"
        )
    print(f"  first tick               {first_ms:8.1f} ms (builds the holder and running indexes)")
    print(f"  of it, running per tier  median {running:8.1f} ms over 3 runs (every tick)")
    print(
        f"priority-inversion rule   median {rule:8.1f} ms over 3 runs ({stuck_n:,} stuck urgent, "
        f"{len(tick_now.holders):,} holders below them; alerting's, once a tick)"
    )
    print(
        f"  kept index (alerting's)  median {kept_rule:8.1f} ms over {r} runs after churn + 100 binds, 100 "
        f"finishes, beside the full evaluation of the same input {full_rule:.1f} ms (first, building it: "
        f"{kept_first:.1f} ms with its tick); same alerts"
    )
    print(
        f"    of it, the index's update median {kept_update:6.1f} ms (the rest: the alerts' text, the lookups)"
    )
    print(
        f"start estimates, all      median {estimated:8.1f} ms over {r} runs (the queue JSON's, once a tick)"
    )
    print(
        f"API documents, first page median {docs_page:7.1f} ms over {r} runs (once a tick: order, 100 rows' JSON), "
        f"beside every row's JSON {docs_all:.1f} ms over 3 runs (what the prebuild made once a tick before)"
    )
    print(f"reference: dict loops     median {naive:8.1f} ms over {r} runs (pods: grouping, messages, GPUs)")
    if not args.no_kinds:
        print(f"  + gangs, jobs, heads, estimates {extras:6.1f} ms over {r} runs")
    if args.kueue:
        print(f"  + Kueue Workloads         {kueue_ref:6.1f} ms over {r} runs")
        per = traced_bytes_per_workload(args.kueue, object_decoder(settings))
        print(f"Kueue Workload memory     {per:8.0f} B retained per Workload (tracemalloc; target <= 1 KB)")
    if args.gated:
        print(f"  + gated pod groups        {gated_ref:6.1f} ms over {r} runs")
        per = traced_bytes_per_gated_object(args.gated, object_decoder(settings))
        print(
            f"Gated group memory        {per:8.0f} B retained per tracked object (a gated pod or its group's "
            f"Workload; tracemalloc; target <= 1 KB)"
        )
    print(f"reference together        {ref:8.1f} ms")
    print(
        f"ratio evaluator/reference {domain / ref:.3f}, after churn {churn_domain / ref:.3f} "
        f"(pods-only reference: {domain / naive:.3f})"
    )
    print(f"ratio tracker/reference   {service / ref:.3f}, after churn {churn_service / ref:.3f}")
    if args.preemptions:
        print(
            f"preemption outcome memory {outcome_open:8.0f} B per open preemptor with its 2 victims "
            f"({outcome_open / 3:.0f} B per tracked object; target <= 1 KB)"
        )
    if args.dra:
        # What a DRA pod and its claim keep in a state of their own (target <= 1 KB per tracked object).
        tracemalloc.start()
        alone = ClusterState()
        made = build_dra(random.Random(13), args.dra, NOW)
        load_dra(alone, made)
        n_objects = len(made.pods) + len(made.claims)
        del made
        kept, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"DRA memory                {kept / n_objects:8.0f} B per tracked object (a pod or its claim)")


if __name__ == "__main__":
    main()
