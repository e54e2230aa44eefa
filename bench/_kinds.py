"""The tick benchmark's gangs and jobs (issue 12): upstream PodGroups, PaddleJobs, JobSets, with their pods.

Built as domain records, as bench/tick.py builds its pods; `Kinds.raw` gives the reference the same objects
as API-shaped dicts. The shapes follow the upstream types: k8s.io/api scheduling/v1alpha2 PodGroup
(spec.schedulingPolicy.gang.minCount, pods naming it in spec.schedulingGroup.podGroupName), paddle-operator
api/v1/paddlejob_types.go (status.phase, per-role pending/starting/running counts, spec.schedulingPolicy),
Volcano's PodGroup named after its PaddleJob (volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go),
kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go (replicatedJobs, the jobset-name label on the
child Jobs' pods) and kubeflow/trainer (a TrainJob controls the JobSet of its name).
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from watchtower.domain.forms.gangs.records import REF_PODGROUP, Gang, GroupRef
from watchtower.domain.records import Controller, OwnerRef, Pod, ResourceQuota
from watchtower.domain.workloads import JOBSET_NAME_LABEL

PADDLE_API = "batch.paddlepaddle.org/v1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
# The word Volcano writes on a gang it cannot place (shape of tests/fixtures/real/volcano-podgroup-pending.json).
VOLCANO_MESSAGE = "{n}/{n} tasks in gang unschedulable: pod group is not ready, {n} Pending, {n} minAvailable"

NewPod = Callable[..., Pod]


@dataclass
class Kinds:
    """The records to load into the state beside the pods, and the pods they made."""

    pod_groups: list[Gang] = field(default_factory=list)
    volcano_groups: list[Gang] = field(default_factory=list)
    controllers: list[Controller] = field(default_factory=list)  # PaddleJobs, JobSets, child Jobs
    quotas: list[ResourceQuota] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)

    @property
    def paddle_jobs(self) -> list[Controller]:
        return [c for c in self.controllers if c.kind == "PaddleJob"]

    @property
    def jobsets(self) -> list[Controller]:
        return [c for c in self.controllers if c.kind == "JobSet"]


def build_kinds(
    rnd: random.Random,
    new: NewPod,
    msgs: list[str],
    prios: list[tuple[int, str]],
    now: float,
    *,
    pod_groups: int = 2000,
    paddle_jobs: int = 2000,
    jobsets: int = 1000,
    namespaces: int = 200,
) -> Kinds:
    k = Kinds()
    for n in range(namespaces):
        # Not at its limit: a PaddleJob's wait still reads them (forms.gangs.wait.job_wait).
        k.quotas.append(ResourceQuota(f"team-{n:03d}", "gpu", hard_gpus=100_000, used_gpus=5_000))

    for i in range(pod_groups):
        ns, prio = f"team-{i % namespaces:03d}", rnd.choice(prios)
        name, size = f"pg-{i}", rnd.choice([2, 4, 8])
        created = now - rnd.uniform(600, 2 * 86400)
        ref = GroupRef(REF_PODGROUP, name)
        shape = i % 4
        # 0: incomplete (pods in PreEnqueue, no condition); 1: complete, unschedulable; 2-3: placed.
        exist = max(1, size // 2) if shape == 0 else size
        msg = rnd.choice(msgs) if shape == 1 else ""
        k.pod_groups.append(
            Gang(ns, name, f"pg-uid-{i}", created, size, shape >= 2, "Unschedulable" if msg else "", msg)
        )
        # A third of the gangs are a Job's pods (the Job is the workload), the rest bare pods (the group is).
        owner = OwnerRef("Job", f"pgj-{i}", "batch/v1", f"pgj-uid-{i}") if i % 3 == 0 else None
        for w in range(exist):
            k.pods.append(
                new(
                    ns,
                    f"{name}-{w}",
                    owner=owner,
                    pending=shape < 2,
                    gpus=8,
                    prio=prio,
                    group=ref,
                    said=shape == 1,
                )
            )

    for i in range(paddle_jobs):
        ns, prio = f"team-{i % namespaces:03d}", rnd.choice(prios)
        name, size = f"pdj-{i}", rnd.choice([2, 4, 8])
        created = now - rnd.uniform(600, 2 * 86400)
        shape = i % 20
        # 0-3: no pods yet; 4-6: half its pods made, pending; 7-9: a Volcano group Pending, no pods; else running.
        made = 0 if shape < 4 or 7 <= shape < 10 else size // 2 if shape < 7 else size
        phase = "Running" if shape >= 10 else "Starting" if made else "Pending"
        volcano = 7 <= shape < 10
        k.controllers.append(
            Controller(
                ns,
                "PaddleJob",
                name,
                f"pdj-uid-{i}",
                priority_class=prio[1],
                gpus_per_pod=8,
                gpus=8 * size,
                pods=size,
                created=created,
                phase=phase,
                pods_reported=made,
                min_available=size if volcano else None,
                queue=f"q-{ns}" if volcano else "",
            )
        )
        if volcano:
            msg = VOLCANO_MESSAGE.format(n=size)
            k.volcano_groups.append(
                Gang(
                    ns,
                    name,
                    f"vpg-uid-{i}",
                    created,
                    size,
                    False,
                    "NotEnoughResources",
                    msg,
                    "Pending",
                    f"q-{ns}",
                )
            )
        owner = OwnerRef("PaddleJob", name, PADDLE_API, f"pdj-uid-{i}")
        for w in range(made):
            k.pods.append(new(ns, f"{name}-worker-{w}", owner=owner, pending=shape < 10, gpus=8, prio=prio))

    for i in range(jobsets):
        ns, prio = f"team-{i % namespaces:03d}", rnd.choice(prios)
        name = f"js-{i}"
        train = i % 3 == 0
        pending = i % 5 < 2
        top = OwnerRef("TrainJob", name, TRAINER_API, f"tj-uid-{i}") if train else None
        rjobs = [
            (rj, rnd.choice([1, 2]), rnd.choice([1, 2, 4]))
            for rj in ("node", "launcher")[: rnd.choice([1, 2])]
        ]
        pods = sum(r * p for _, r, p in rjobs)
        k.controllers.append(
            Controller(ns, "JobSet", name, f"js-uid-{i}", top, prio[1], None, 8, 8 * pods, pods)
        )
        labels = {JOBSET_NAME_LABEL: name}  # one label set per JobSet, shared as the decoder does
        jobset_ref = OwnerRef("JobSet", name, JOBSET_API, f"js-uid-{i}")
        for rj, replicas, par in rjobs:
            for j in range(replicas):
                job = f"{name}-{rj}-{j}"
                k.controllers.append(
                    Controller(ns, "Job", job, f"{job}-uid", jobset_ref, prio[1], None, 8, 8 * par, par)
                )
                owner = OwnerRef("Job", job, "batch/v1", f"{job}-uid")
                for p in range(par):
                    k.pods.append(
                        new(
                            ns,
                            f"{job}-{p}-x{i}",
                            owner=owner,
                            pending=pending,
                            gpus=8,
                            prio=prio,
                            labels=labels,
                        )
                    )
    return k


# ---- the reference: the same objects as dicts, the same answers by walking them ----------------------


def raw_kinds(k: Kinds) -> dict[str, list[dict[str, Any]]]:
    """Return the gangs and jobs as API-shaped dicts with just the fields the reference reads."""
    return {
        "podgroups": [
            {
                "metadata": {"namespace": g.namespace, "name": g.name, "created": g.created},
                "spec": {"schedulingPolicy": {"gang": {"minCount": g.min_count}}},
                "status": {
                    "conditions": [
                        {
                            "type": "PodGroupScheduled",
                            "status": "True" if g.scheduled else "False",
                            "message": g.message,
                        }
                    ]
                },
            }
            for g in k.pod_groups
        ],
        "volcano": [
            {
                "metadata": {"namespace": g.namespace, "name": g.name},
                "spec": {"minMember": g.min_count, "queue": g.queue},
                "status": {"phase": g.phase, "conditions": [{"type": "Unschedulable", "message": g.message}]},
            }
            for g in k.volcano_groups
        ],
        "paddlejobs": [
            {
                "metadata": {"namespace": c.namespace, "name": c.name, "created": c.created},
                "spec": {
                    "worker": {"replicas": c.pods, "gpus": c.gpus_per_pod},
                    "priorityClass": c.priority_class,
                },
                "status": {"phase": c.phase, "worker": {"pending": c.pods_reported}},
            }
            for c in k.paddle_jobs
        ],
        "jobsets": [
            {
                "metadata": {
                    "namespace": c.namespace,
                    "name": c.name,
                    "ownerReferences": [{"kind": c.owner.kind, "name": c.owner.name}] if c.owner else [],
                }
            }
            for c in k.jobsets
        ],
        "quotas": [
            {"metadata": {"namespace": q.namespace, "name": q.name}, "hard": q.hard_gpus, "used": q.used_gpus}
            for q in k.quotas
        ],
    }


def naive_extras(
    raw_pods: list[dict[str, Any]],
    raw_nodes: list[dict[str, Any]],
    kinds: dict[str, list[dict[str, Any]]],
    tier_of: Callable[[int, str], str],
    now: float,
    *,
    window: float = 6 * 3600.0,
    stuck_after: float = 600.0,
) -> int:
    """What the tick adds for issue 12, by walking everything: gangs against the pods that exist, PaddleJobs
    against theirs and their namespace's quotas, JobSets lifted to their TrainJob, each tier's head tried on
    every node, and a start estimate per waiting workload from the tier's recent waits."""
    trainjob = {
        (j["metadata"]["namespace"], j["metadata"]["name"]): refs[0]["name"]
        for j in kinds["jobsets"]
        if (refs := j["metadata"]["ownerReferences"]) and refs[0]["kind"] == "TrainJob"
    }
    live_in_group: dict[tuple[str, str], int] = defaultdict(int)
    live_of_job: dict[tuple[str, str], int] = defaultdict(int)
    queued: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    waits: dict[str, list[float]] = defaultdict(list)
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for p in raw_pods:
        m, spec, st = p["metadata"], p["spec"], p["status"]
        if st["phase"] in ("Succeeded", "Failed"):
            continue
        ns = m["namespace"]
        group = spec.get("schedulingGroup")
        if group:
            live_in_group[(ns, group["podGroupName"])] += 1
        refs = m.get("ownerReferences")
        if refs and refs[0]["kind"] == "PaddleJob":
            live_of_job[(ns, refs[0]["name"])] += 1
        if spec["nodeName"]:
            u = used[spec["nodeName"]]
            u[0] += spec["gpus"]
            u[1] += spec["cpu"]
            u[2] += spec["memory"]
            for c in st["conditions"]:
                if c["type"] == "PodScheduled" and c["status"] == "True" and now - window <= c["at"] <= now:
                    waits[tier_of(spec["priority"], spec["priorityClassName"])].append(c["at"] - m["created"])
            continue
        jobset = m.get("labels", {}).get(JOBSET_NAME_LABEL)
        if jobset:
            top = trainjob.get((ns, jobset))
            key = (ns, "TrainJob", top) if top else (ns, "JobSet", jobset)
        elif refs:
            key = (ns, refs[0]["kind"], refs[0]["name"])
        elif group:
            key = (ns, "PodGroup", group["podGroupName"])
        else:
            key = (ns, "Pod", m["name"])
        queued[key].append(p)
    out: list[tuple[Any, ...]] = []
    for g in kinds["podgroups"]:
        m = g["metadata"]
        need, live = (
            g["spec"]["schedulingPolicy"]["gang"]["minCount"],
            live_in_group[(m["namespace"], m["name"])],
        )
        if g["status"]["conditions"][0]["status"] != "True" and live < need:
            out.append(
                (
                    (m["namespace"], "PodGroup", m["name"]),
                    f"gang incomplete: {live} of minCount {need} pods exist",
                )
            )
    volcano = {(g["metadata"]["namespace"], g["metadata"]["name"]): g for g in kinds["volcano"]}
    for j in kinds["paddlejobs"]:
        m, phase = j["metadata"], j["status"]["phase"]
        ns, name = m["namespace"], m["name"]
        live = live_of_job[(ns, name)]
        if phase not in ("", "Pending", "Starting") or live >= j["spec"]["worker"]["replicas"]:
            continue
        asked = (j["spec"]["worker"]["replicas"] - live) * j["spec"]["worker"]["gpus"]
        blocked = [
            q for q in kinds["quotas"] if q["metadata"]["namespace"] == ns and q["used"] + asked > q["hard"]
        ]
        vg = volcano.get((ns, name))
        why = (
            "quota" if blocked else vg["status"]["conditions"][0]["message"] if vg else f"{live} pods created"
        )
        out.append(((ns, "PaddleJob", name), now - m["created"], why))
    # Each tier's head (the oldest queued workload of its highest priority) tried on every node.
    heads: dict[str, tuple[int, float, dict[str, Any]]] = {}
    for members in queued.values():
        rep = min(members, key=lambda p: p["metadata"]["created"])
        s = rep["spec"]
        tier = tier_of(s["priority"], s["priorityClassName"])
        best = heads.get(tier)
        if best is None or (-s["priority"], rep["metadata"]["created"]) < (best[0], best[1]):
            heads[tier] = (-s["priority"], rep["metadata"]["created"], rep)
    for _, created, rep in heads.values():
        if now - created < stuck_after:
            continue
        s = rep["spec"]
        for n in raw_nodes:
            u = used.get(n["name"], [0, 0, 0])
            if (
                s["gpus"] <= n["gpus"] - u[0]
                and s["cpu"] <= n["cpu"] - u[1]
                and s["memory"] <= n["memory"] - u[2]
            ):
                out.append((n["name"], rep["metadata"]["name"]))
                break
    sorted_waits = {t: sorted(ws) for t, ws in waits.items()}
    for members in queued.values():
        rep = min(members, key=lambda p: p["metadata"]["created"])
        s = rep["spec"]
        ws = sorted_waits.get(tier_of(s["priority"], s["priorityClassName"]), [])
        waited = now - rep["metadata"]["created"]
        longer = ws[bisect_right(ws, waited) :]
        if len(longer) >= 5:
            out.append((rep["metadata"]["name"], longer[len(longer) // 2] - waited))
    return len(out)
