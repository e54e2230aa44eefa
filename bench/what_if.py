"""How long the weekly report's "What if" takes for a busy week: bench/replay.py's week (20,000 jobs, gangs,
four tiers, 30 teams, on 1,000 GPUs) through `watchtower.replay.what_if.what_if` under two policies, which
replays it three times (the configuration itself, the fidelity line, and each policy) and figures each tier
and team. It runs in the service's replay worker process, never on the event loop, so the figure is how long
the week's report waits for its section, not a stall of the tick.

The reference, measured in the same run: the three bare replays (`watchtower.replay.engine.replay`) of the
same jobs under the same policies, so the difference is what the section's figures cost on top. CPU seconds
(time.process_time).

    PYTHONPATH=$PWD .venv/bin/python bench/what_if.py [--jobs 20000]
"""

from __future__ import annotations

import argparse
import time

from bench.replay import week_of_jobs
from watchtower.config.model import Settings
from watchtower.replay.engine import replay
from watchtower.replay.policy import NodeSpec
from watchtower.replay.what_if import retier, week_policy, what_if

GPUS = 1000
POLICIES = [
    (
        "no preemption",
        {"preemption": {"critical": "never", "high": "never", "medium": "never", "low": "never"}},
    ),
    ("medium preempts low", {"preemption": {"medium": ["low"]}, "restart": {"checkpoint_every": "1h"}}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    args = ap.parse_args()
    jobs = week_of_jobs(7, args.jobs, GPUS)
    nodes = [NodeSpec(name=f"gpu-{i}", gpus=8) for i in range(GPUS // 8)]
    tiers = Settings().tiers
    configured = Settings().tier_policy()

    t0 = time.process_time()
    for name, mapping in [("as configured", {}), *POLICIES]:
        p = week_policy(name, mapping, tiers, nodes)
        replay(retier(jobs, p, configured), p)
    bare = time.process_time() - t0

    t0 = time.process_time()
    section = what_if(jobs, nodes, tiers, POLICIES)
    took = time.process_time() - t0
    assert not section.failures, section.failures
    print(f"what if, {args.jobs:,} jobs on {GPUS:,} GPUs, 2 policies (3 replays): {took:.1f} s CPU")
    print(f"reference, the same 3 replays bare:                       {bare:.1f} s CPU")
    print(f"the section's figures on top:                             {took - bare:+.1f} s")


if __name__ == "__main__":
    main()
