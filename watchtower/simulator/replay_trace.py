"""The simulator's ground truth as a replay's input: each workload it ran as a trace row (watchtower.replay's
TraceJob) and the demo's cluster as a replay policy, so a replay of a simulated week can be set beside what
the simulator did (the fidelity check, docs/replay.md).

Pure: it reads workloads and a configuration, never the clock or the store. What a row says:
- submitted: when the workload was created; started (observed): when the last of its GPU pods was first
  bound with every one of them up (the moment its queue wait ends, as the fairness report's does);
- duration: its run time plus the image pulls of that first start (the simulator holds the GPUs while the
  images pull, and counts the run only once every pod runs);
- pods and GPUs per pod: its GPU pods only (a PaddleJob's parameter server asks none), with their CPU and
  memory; a gang (a Job with the Workload API's PodGroup, a PaddleJob Volcano schedules) has `gang_min` = its
  pods; the others, plain PaddleJobs too, have none: kube-scheduler places their pods one by one (the demo's
  policy says `gangs: declared`);
- the tier from its PriorityClass as the service resolves a pod's, the team from its namespace's.
- deleted: when people deleted a workload that never started (its quota had refused it too long).
- grace: how long its pods take to stop when preempted, the simulator's average for its grace period.
- controller: false for a bare pod (a quota refusing it at creation turns it away; nothing retries it).
Left out and counted: bare pods a ResourceQuota refused (the API server never made them: nothing waited),
workloads asking their GPUs through a DRA claim (the replay has no device classes, and
the DRA-only nodes are left out of the policy with them) and workloads without GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from watchtower.config.model import SimulatorConfig, TierConfig
from watchtower.domain.tiers import TierPolicy
from watchtower.replay.policy import ReplayPolicy, policy_from_mapping
from watchtower.replay.trace import TraceJob
from watchtower.simulator.controllers import GIVE_UP_AFTER
from watchtower.simulator.pods import SimWorkload, memory_bytes
from watchtower.simulator.workloads import CLASS_BY_NAME


@dataclass
class SimTrace:
    jobs: list[TraceJob]
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many


def trace_of(workloads: Iterable[SimWorkload], tiers: TierPolicy) -> SimTrace:
    """Return the trace rows of `workloads` in submission order, and what was left out and why."""
    out = SimTrace([])
    for w in sorted(workloads, key=lambda w: (w.created, w.spec.name)):
        spec = w.spec
        if spec.claim_template:
            _skip(out, "asks its GPUs through a DRA claim")
            continue
        if spec.kind == "Pod" and w.refused_since is not None and w.first_bound is None:
            _skip(out, "a bare pod its team's quota refused (the API never made it)")
            continue
        gpu_pods = [p for p in spec.pods if p.gpus > 0]
        if not gpu_pods:
            _skip(out, "asks no GPUs")
            continue
        cls = CLASS_BY_NAME.get(spec.priority_class)
        priority = cls.value if cls is not None else 0
        pull = (
            w.first_running - w.first_bound
            if w.first_running is not None and w.first_bound is not None
            else 0.0
        )
        # Pods of one workload ask alike, but for safety the largest ask stands for them all.
        widest = max(gpu_pods, key=lambda p: (p.gpus, int(p.cpu), memory_bytes(p.memory)))
        out.jobs.append(
            TraceJob(
                id=f"{spec.namespace}/{spec.name}",
                team=spec.team,
                tier=tiers.tier_of(priority, spec.priority_class).name,
                priority=priority,
                submitted=w.created,
                duration=spec.duration + pull,
                pods=len(gpu_pods),
                gpus_per_pod=widest.gpus,
                started=w.first_bound,
                cpu_millis_per_pod=int(widest.cpu) * 1000,
                memory_bytes_per_pod=memory_bytes(widest.memory),
                # Only a PodGroup (the Workload API's, or Volcano's) gangs the pods: a plain PaddleJob's are
                # placed one by one, as any controller's.
                gang_min=len(gpu_pods) if spec.pod_group or spec.volcano_queue else None,
                deleted=w.deleted_at if w.first_bound is None else None,
                grace=_stop_time(spec.grace),
                controller=spec.kind != "Pod",
            )
        )
    return out


def _stop_time(grace: float) -> float:
    """Return how long the simulator's pods of this terminationGracePeriodSeconds take to stop when
    preempted, on average: a training pod checkpoints for 30 to 100 % of its grace, the others stop in 2
    to 10 s (binding.py). A recorded trace has each job's own, measured."""
    return 0.65 * grace if grace > 60 else 6.0


def _skip(out: SimTrace, why: str) -> None:
    out.skipped[why] = out.skipped.get(why, 0) + 1


def demo_policy(
    config: SimulatorConfig,
    tiers: Sequence[TierConfig],
    *,
    name: str = "demo",
    termination_grace: float = 30.0,
    **changes: object,
) -> ReplayPolicy:
    """Return the simulated cluster's policy: its tiers, its schedulable nodes (not the cordoned ones nor
    the DRA-only ones), each research team's GPU quota (the story's production team has none), preemption as its PriorityClasses allow
    (the low tier's classes never preempt: long-training says Never and batch has nothing below it), and a
    preempted job resuming where it stopped (the simulator keeps a workload's progress). `changes`: other
    policy keys on top (e.g. `preemption`), for an alternative."""
    g = config.gpus_per_node
    schedulable = config.nodes - min(config.cordoned_nodes, config.nodes - 1)
    data: dict[str, object] = {
        "name": name,
        "tiers": [t.model_dump() for t in tiers],
        # As the simulator makes them (cluster.py): 16 cores and 96 GiB per GPU.
        "nodes": {"count": schedulable, "gpus": g, "cpu": 16 * g, "memory_gib": 96 * g},
        "quotas": ({t: config.team_gpu_quota for t in config.teams} if config.team_gpu_quota > 0 else {}),
        "preemption": {tiers[-1].name: "never"},
        "scoring": "LeastAllocated",  # kube-scheduler's default profile, as the simulator's scheduler
        "termination_grace": termination_grace,
        "restart": {"mode": "resume"},
        # kube-scheduler gangs only the pods a PodGroup names; the others are placed one by one.
        "gangs": "declared",
        # The simulator's controllers make pods one at a time and retry one the quota refused after 10 s,
        # doubling to 5 min (simulator/forms/quota/controller.py; the Job controller's own: 1 s to 60 s).
        # People delete a job their quota refused for two hours (controllers.py GIVE_UP_AFTER).
        "quota_retry": {"initial": 10.0, "max": 300.0, "per_pod": True, "give_up_after": GIVE_UP_AFTER},
    }
    data.update(changes)
    return policy_from_mapping(data, name)
