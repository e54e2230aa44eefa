"""How long a policy replay of a busy week takes: 20,000 jobs (single pods and gangs, four tiers, 30 teams) on
1,000 GPUs (125 nodes of 8), replayed under two policies (tiers without preemption; tiers with preemption as
kube-scheduler does it, a 30 s grace and hourly checkpoints), each timed with its peak memory (tracemalloc,
the replay alone: the trace is built before). The target: <= 30 s and <= 1 GB per replay on one core.

The reference, measured in the same run: the demo's simulator (watchtower.simulator, as bench/demo_past_week.py
runs it) stepping at full speed in the demo's 2-minute steps: the demo's own cluster (96 GPUs) through a whole
week (`--reference-hours`), and a cluster of the replay's size and arrival rate (125 nodes of 8, 119 arrivals
an hour) for `--scaled-hours` (default 6: the whole week would take minutes), scaled to the week. Times are
CPU seconds (time.process_time), so a busy machine stretches them less than the wall clock.

    PYTHONPATH=$PWD .venv/bin/python bench/replay.py [--jobs 20000] [--scaled-hours 6] [--no-reference]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import time
import tracemalloc

from watchtower.commands.demo.past_week import STEP
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings
from watchtower.replay.engine import replay
from watchtower.replay.policy import ReplayPolicy, policy_from_mapping
from watchtower.replay.results import summarise
from watchtower.replay.trace import TraceJob

WEEK = 7 * 86400.0
TIERS = {"critical": (1_000_000, 0.05), "high": (900_000, 0.15), "medium": (500_000, 0.30), "low": (0, 0.50)}
# (pods, GPUs per pod, weight): mostly single pods, some gangs of whole nodes, a few large gangs.
SHAPES = [(1, 1, 30), (1, 2, 10), (1, 4, 10), (1, 8, 15), (2, 8, 15), (4, 8, 12), (8, 8, 6), (16, 8, 2)]
LOAD = 0.85  # offered GPU-time / capacity


def week_of_jobs(seed: int, count: int, gpus: int, load: float = LOAD) -> list[TraceJob]:
    """Return `count` jobs over a week: Poisson arrivals, log-normal run times scaled so that the offered load
    is `load` of `gpus`, tiers and shapes by the weights above, 30 teams of Zipf-like sizes."""
    rng = random.Random(seed)
    teams = [f"team-{k:02d}" for k in range(30)]
    team_w = [1 / (k + 1) for k in range(30)]
    shapes = [(p, g) for p, g, _ in SHAPES]
    shape_w = [w for *_, w in SHAPES]
    mean_gpus = sum(p * g * w for p, g, w in SHAPES) / sum(shape_w)
    sigma = 1.2
    mean_run = load * gpus * WEEK / count / mean_gpus
    mu = math.log(mean_run) - sigma * sigma / 2
    names, tier_w = list(TIERS), [w for _, w in TIERS.values()]
    out, t = [], 0.0
    for k in range(count):
        t += rng.expovariate(count / WEEK)
        tier = rng.choices(names, tier_w)[0]
        pods, per_pod = rng.choices(shapes, shape_w)[0]
        out.append(
            TraceJob(
                id=f"job-{k}",
                team=rng.choices(teams, team_w)[0],
                tier=tier,
                priority=TIERS[tier][0],
                submitted=t,
                duration=rng.lognormvariate(mu, sigma),
                pods=pods,
                gpus_per_pod=per_pod,
            )
        )
    return out


POLICIES = {
    "tiers, no preemption": {"preemption": {t: "never" for t in TIERS}},
    "tiers and preemption (kube-scheduler's rule)": {
        "termination_grace": "30s",
        "restart": {"checkpoint_every": "1h"},
    },
}


def policy(name: str, extra: dict[str, object], gpus: int) -> ReplayPolicy:
    return policy_from_mapping({"name": name, "nodes": {"count": gpus // 8, "gpus": 8}, **extra})


def timed_replay(jobs: list[TraceJob], p: ReplayPolicy) -> tuple[float, int, dict[str, object]]:
    tracemalloc.start()
    t0 = time.process_time()
    run = replay(jobs, p)
    figures = summarise(run, [t.name for t in p.tier_policy().tiers])
    took = time.process_time() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return took, peak, figures


def reference(scaled: bool, hours: float) -> tuple[float, float, str]:
    """Return (CPU seconds, simulated seconds, what cluster) of the demo's simulator stepping `hours` at full
    speed in the demo's steps: its own cluster, or (`scaled`) one of the replay's size and arrival rate."""
    cfg = Settings().simulator.model_copy(update={"seed": Settings().simulator.seed + 1, "metrics_port": 0})
    if scaled:
        cfg = cfg.model_copy(update={"nodes": 125, "arrivals_per_hour": 20_000 / 168, "team_gpu_quota": 400})
    what = f"{cfg.nodes} nodes of {cfg.gpus_per_node} GPUs, {cfg.arrivals_per_hour:.0f} arrivals an hour"
    sim = demo_cluster(cfg)
    start = sim.now()
    end = start + hours * 3600.0
    t0 = time.process_time()
    while sim.now() < end:
        sim.step(min(STEP, end - sim.now()))
        sim.drain()
    return time.process_time() - t0, sim.now() - start, what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", type=float, default=LOAD, help="offered GPU-time / capacity")
    ap.add_argument("--reference-hours", type=float, default=168.0, help="of the demo's own cluster")
    ap.add_argument("--scaled-hours", type=float, default=6.0, help="of a cluster of the replay's size")
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    jobs = week_of_jobs(args.seed, args.jobs, args.gpus, args.load)
    print(
        f"{len(jobs)} jobs over a week on {args.gpus} GPUs (offered load {args.load:.0%}), load {os.getloadavg()[0]:.2f}"
    )
    for name, extra in POLICIES.items():
        took, peak, f = timed_replay(jobs, policy(name, extra, args.gpus))
        print(
            f"{name}: {took:.1f} s CPU, peak {peak / 2**20:.0f} MiB; utilisation {f['utilisation']:.1%}, "
            f"{f['preemptions']} preemptions, {f['gpu_hours_lost']:.0f} GPU-h lost, Jain {f['jain_index']:.3f}"
        )
        for tier in f["tiers"]:  # type: ignore[attr-defined]
            w = tier["wait_seconds"]
            print(
                f"    {tier['tier']:>8}: {tier['jobs']:5d} jobs, wait mean {w['mean'] / 60:7.1f} min, "
                f"p50 {w['p50'] / 60:6.1f}, p95 {w['p95'] / 60:7.1f}, p99 {w['p99'] / 60:7.1f}, "
                f"max {w['max'] / 60:7.1f}; {tier['preemptions']} preemptions"
            )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of the whole process so far (trace, both replays): {rss:.0f} MiB")
    if not args.no_reference:
        for scaled, hours in ((False, args.reference_hours), (True, args.scaled_hours)):
            cpu, simulated, what = reference(scaled, hours)
            part = (
                "the whole week" if simulated >= WEEK else f"{simulated / 3600:g} h of it, scaled to the week"
            )
            print(
                f"reference, the demo's simulator at full speed ({what}): {cpu:.1f} s CPU for {part}: "
                f"{cpu * WEEK / simulated:.0f} s a week (load {os.getloadavg()[0]:.2f})"
            )


if __name__ == "__main__":
    main()
