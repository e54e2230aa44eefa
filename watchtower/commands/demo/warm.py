"""The warm start: a cluster nearly full of low-tier training, then a burst of higher tiers.

So that a demo shows, within its first simulated hour, waiting work in every tier, preemptions, a quota
refusal and a partial gang. It runs the ordinary simulation from two hours before the start; nothing is
placed by hand. `demo_cluster` builds the simulated cluster the demo, `watchtower run` in simulator mode and
the past week play: the warm start is the cluster's `Prelude`, unless the config's `warm_start` is off.
"""

from __future__ import annotations

import functools

from watchtower.commands.demo import story
from watchtower.config.model import SimulatorConfig
from watchtower.simulator import objects as obj
from watchtower.simulator.cluster import SimulatedCluster
from watchtower.simulator.forms.gangs.controller import Gangs
from watchtower.simulator.forms.kueue.controller import KueueStandIn
from watchtower.simulator.workloads import (
    Pattern,
    dra_job,
    paddle_job,
    single_pod,
    team_namespace,
)

WARMUP = 2 * 3600.0
# A sharded checkpoint of a large model to object storage: a preempted pretraining worker takes minutes to go,
# and whoever preempted it waits on its nominated node meanwhile.
PRETRAIN_GRACE = 1200


def warm_start(sim: SimulatedCluster) -> None:
    """Fill the cluster and queue the burst, from WARMUP before the start: the clock ends at the start."""
    cfg = sim.config
    t0 = sim.now() + WARMUP
    teams = list(cfg.teams)
    g = cfg.gpus_per_node
    half, quarter = max(1, g // 2), max(1, g // 4)
    schedulable = cfg.nodes - min(cfg.cordoned_nodes, cfg.nodes - 1)
    k = min(3, schedulable)  # nodes left with room for small pods: they fragment
    quota = cfg.team_gpu_quota or 10**9
    first, others = teams[0], teams[1:] or teams
    if cfg.dra_nodes:
        # 0. Every DRA GPU held until story.DRA_FREED after the start, one whole node a pod.
        sim.submit(
            dra_job(
                name=story.DRA_HOLDER,
                team=story.PRODUCTION_TEAM,
                priority_class="long-training",
                gpus=g,
                replicas=cfg.dra_nodes,
                duration=WARMUP - 300 + story.DRA_FREED,
            )
        )

    # 1. Low-tier training gangs fill all but `k` half-nodes.
    workers_left = 2 * schedulable - k
    held = dict.fromkeys(teams, 0)
    n = 0
    while workers_left > 0:
        w = min(4, workers_left)
        workers_left -= w
        team = first if held[first] + w * half <= quota - half else others[n % len(others)]
        held[team] += w * half
        sim.submit(
            paddle_job(
                name=f"pretrain-{n:02d}",
                team=team,
                priority_class="batch" if n % 2 == 0 else "long-training",
                workers=w,
                gpus_per_worker=half,
                # Measured from now, not from the warm-up: the cluster turns over within a few hours.
                duration=WARMUP + sim.rng.uniform(1.5, 6) * 3600,
                pattern=Pattern.IDLE if n == 1 else Pattern.BUSY,
                grace=PRETRAIN_GRACE,
            )
        )
        n += 1
    sim.step(60)
    # 2. Small batch pods land on the half-empty nodes (the scheduler spreads), leaving fragments.
    for i in range(k):
        team = first if held[first] + quarter <= quota else others[i % len(others)]
        held[team] += quarter
        sim.submit(
            single_pod(
                kind="Job",
                name=f"etl-{i:02d}",
                team=team,
                priority_class="batch",
                gpus=quarter,
                duration=WARMUP + sim.rng.uniform(1, 3) * 3600,
            )
        )
    sim.step(WARMUP - 60 - 300)
    # 3. A long-training gang whose workers fit the fragments but one: a partial gang that may not preempt.
    if half > quarter:
        sim.submit(
            paddle_job(
                name="llm-finetune",
                team=others[0],
                priority_class="long-training",
                workers=k + 1,
                gpus_per_worker=half - quarter,
                duration=6 * 3600,
            )
        )
    sim.step(300 - 10)
    # 4. The burst: every higher tier at once, a lowest-tier job and a job over its team's quota.
    gen = sim.generator
    sim.submit(gen.debug(team=others[0], gpus=g))
    sim.submit(gen.serving(team=others[1 % len(others)], replicas=2, gpus=half))
    sim.submit(gen.experiment(team=others[2 % len(others)], gpus=half))
    sim.submit(gen.batch_job(team=others[0], gpus=quarter))
    if cfg.team_gpu_quota:
        sim.submit(gen.batch_job(team=first, gpus=g))
    # 5. The scripted moments after the start (commands/demo/story.py).
    for m in story.moments(gen, teams, g, cfg.dra_nodes):
        sim.script(t0 + m.at, functools.partial(m.make, sim.quota_room))
    sim.step(10)


class WarmStart:
    """The demo's prelude: the story's Volcano queue, production namespace and Kueue ClusterQueue, then the
    warm start's two hours before the start."""

    lead = WARMUP

    def furnish(self, sim: SimulatedCluster) -> None:
        cfg = sim.config
        # The story's Volcano queue (an admin's): room for its PaddleJob, half of it guaranteed.
        gpus = story.VOLCANO_WORKERS * max(1, cfg.gpus_per_node // 2)
        # A busy cluster never has a gang's GPUs idle: the demo's vc-scheduler lets groups in on the queue's
        # capability alone (overcommit-factor 10), so its pods wait in Volcano's allocate words.
        volcano = sim.form(Gangs).volcano
        volcano.overcommit_factor = 10.0
        volcano.add_queue(
            story.VOLCANO_QUEUE,
            weight=2,
            capability_gpus=gpus,
            deserved_gpus=gpus,
            guarantee_gpus=gpus // 2,
        )
        # Production serving and on-call debugging are not capped by the research teams' quotas.
        prod = team_namespace(story.PRODUCTION_TEAM)
        sim.namespaces.setdefault(prod, obj.namespace(prod, team=story.PRODUCTION_TEAM))
        # Kueue's ClusterQueue for the story's queued Jobs: room for one of them (2 pods x a quarter node).
        sim.form(KueueStandIn).setup(2 * max(1, cfg.gpus_per_node // 4), [prod])

    def play(self, sim: SimulatedCluster) -> None:
        warm_start(sim)


def demo_cluster(
    config: SimulatorConfig | None = None,
    *,
    start: float | None = None,
    warm_start: bool | None = None,
    tick: float = 0.2,
) -> SimulatedCluster:
    """Return the demo's simulated cluster: warm-started with the story unless `warm_start` (by default the
    config's) is off."""
    cfg = config or SimulatorConfig()
    warm = cfg.warm_start if warm_start is None else warm_start
    return SimulatedCluster(cfg, start=start, tick=tick, prelude=WarmStart() if warm else None)
