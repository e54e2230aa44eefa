"""The demo's ready replay of its past week: the simulator's own record of the week (past_week.PastWeek's
trace) replayed through the service's replay pool under two policies, the demo's own (the medium tier
preempts the low one, as its `experiment` PriorityClass does) and the same without preemption for the medium
tier, so that a visitor sees what the replay answers without writing a policy. Its page is linked from the
status page ("replay of last week") and the week's fairness report."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from watchtower.api.container import Container
from watchtower.config.model import Settings
from watchtower.replay.policy import ReplayPolicy
from watchtower.simulator.replay_trace import demo_policy


def demo_policies(settings: Settings) -> list[ReplayPolicy]:
    """Return the demo's policy and the alternative it is set beside."""
    tiers = settings.tier_policy()
    medium = tiers.tier_of(500_000, "experiment").name  # the demo's experiments' tier
    low = settings.tiers[-1].name
    own = demo_policy(settings.simulator, settings.tiers, name=f"the demo's ({medium} preempts {low})")
    alternative = demo_policy(
        settings.simulator,
        settings.tiers,
        name=f"{medium} without preemption",
        preemption={medium: "never", low: "never"},
    )
    return [own, alternative]


def policy_text(policy: ReplayPolicy) -> str:
    """Return the policy as the JSON a policy file may hold (keys as the file names them)."""
    return orjson.dumps(policy.model_dump(mode="json", by_alias=True)).decode()


async def offer_replay(container: Container, settings: Settings, week: str, trace: str) -> str | None:
    """Queue the replay of `week`'s trace in the service's pool and link its page; return the page's path
    (None: the service runs no replays, or the trace is empty)."""
    jobs = container.replays
    if jobs is None or not trace.strip():
        return None
    texts = [policy_text(p) for p in demo_policies(settings)]
    entry: Any = await asyncio.to_thread(jobs.submit, trace, texts)
    page = f"/replays/{entry.id}"
    container.week_replays[week] = page
    return page
