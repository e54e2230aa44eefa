"""The seeds' story on the demo's week (docs/replay.md, "The seeds' story"): simulate the week the demo
simulates as its past week (its cluster, seed + 1, warm start and story; about 30 s of CPU), write its trace
with each job's PriorityClass (no tier, no priority value: each policy's tiers decide them) and three
policies, the same cluster each time:

  no-tiers.json          one tier holding every PriorityClass: one priority, first come first served
  tiers.json             the configuration's default tiers, no tier preempts
  tiers-preemption.json  the default tiers, each preempting the tiers below it (kube-scheduler's rule),
                         the low tier preempting nothing (its classes never do in the demo)

then prints the command that replays them, which the reader runs:

    PYTHONPATH=$PWD .venv/bin/python bench/demo_week_story.py --out /tmp/story
    watchtower replay --trace /tmp/story/demo-week.csv --policy /tmp/story/no-tiers.json \
        --policy /tmp/story/tiers.json --policy /tmp/story/tiers-preemption.json
"""

from __future__ import annotations

import argparse
import csv
import json
from datetime import UTC
from pathlib import Path

from watchtower.commands.demo.past_week import STEP
from watchtower.commands.demo.settings import demo_simulator
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings
from watchtower.domain.fairness.week import IsoWeek
from watchtower.simulator.replay_trace import demo_policy, trace_of
from watchtower.simulator.workloads import PRIORITY_CLASSES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="directory for the trace and the policies")
    ap.add_argument("--week", default="2025-W52", help="the ISO week to simulate (default: the demo's)")
    args = ap.parse_args()
    settings = Settings()
    cfg = settings.simulator.model_copy(
        update={"seed": settings.simulator.seed + 1, "metrics_port": 0, **demo_simulator(settings.simulator)}
    )
    year, w = args.week.split("-W")
    start, end = IsoWeek(int(year), int(w)).bounds(UTC)
    sim = demo_cluster(cfg, start=start)
    seen = {id(x): x for x in sim.workloads}
    while sim.now() < end:
        sim.step(min(STEP, end - sim.now()))
        sim.drain()
        for x in sim.workloads:
            seen.setdefault(id(x), x)
    base = demo_policy(cfg, settings.tiers)
    trace = trace_of(seen.values(), base.tier_policy())
    cls = {f"{x.spec.namespace}/{x.spec.name}": x.spec.priority_class for x in seen.values()}
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "demo-week.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(
            ["id", "team", "priority_class", "submitted", "started", "duration", "pods", "gpus_per_pod",
             "cpu_per_pod", "memory_per_pod", "gang_min", "deleted"]
        )  # fmt: skip
        for j in trace.jobs:
            out.writerow(
                [j.id, j.team, cls[j.id], j.submitted, "" if j.started is None else j.started, j.duration,
                 j.pods, j.gpus_per_pod, f"{j.cpu_millis_per_pod}m", j.memory_bytes_per_pod,
                 "" if j.gang_min is None else j.gang_min, "" if j.deleted is None else j.deleted]
            )  # fmt: skip
    common = base.model_dump(mode="json", by_alias=True)
    # A PriorityClass no default tier lists (the story's `sweep`) goes to the tier of its value, as the
    # service puts a pod: listed here, since the trace gives classes, not values.
    listed = {c for t in settings.tiers for c in t.classes}
    for c in PRIORITY_CLASSES:
        if c.name not in listed:
            tier = base.tier_policy().tier_of(c.value).name
            next(t for t in common["tiers"] if t["name"] == tier)["classes"].append(c.name)
    low = settings.tiers[-1].name
    one = {
        **common["tiers"][-1],
        "name": "all",
        "min_priority": 0,
        "classes": [c.name for c in PRIORITY_CLASSES],
    }
    policies = {
        "no-tiers": {**common, "name": "no tiers", "tiers": [one], "preemption": {}},
        "tiers": {
            **common,
            "name": "tiers",
            "preemption": dict.fromkeys((t.name for t in settings.tiers), "never"),
        },
        "tiers-preemption": {**common, "name": "tiers and preemption", "preemption": {low: "never"}},
    }
    for name, p in policies.items():
        (args.out / f"{name}.json").write_text(json.dumps(p, indent=1))
    print(f"{len(trace.jobs)} jobs of {args.week} in {args.out / 'demo-week.csv'}; left out: {trace.skipped}")
    print(
        f"watchtower replay --trace {args.out / 'demo-week.csv'} "
        + " ".join(f"--policy {args.out / n}.json" for n in policies)
    )


if __name__ == "__main__":
    main()
