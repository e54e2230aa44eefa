"""The weekly report's "What if": a week's recorded jobs replayed under each policy of `replay.what_if`, and
under the running configuration itself (the fidelity line), figured per tier and per team.

A what-if policy is a policy file's mapping (docs/replay.md, "The policy") whose every key is optional: the
tiers fall back to the running configuration's, the nodes to the inventory recorded for the week.

A recorded job carries the tier and priority it had. Under a policy it keeps its tier when the policy has
one of that name, its priority moved by as much as the policy moves that tier's `min_priority` (a policy
that raises `medium` raises every medium job); a tier the policy does not name is re-read from the job's
priority, and the job takes that tier's `min_priority` (a one-tier policy runs the week first come, first
served).

`what_if` is the whole computation, from plain values that pickle (it runs in the service's replay worker
process, or a thread from the command line); one policy that cannot be replayed is a failure in the
section, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from watchtower.config.model import TierConfig
from watchtower.config.what_if import WHAT_IF_RESERVED
from watchtower.domain.fairness.shares import jain_index
from watchtower.domain.fairness.what_if import (
    RunKind,
    TeamFigures,
    TierFigures,
    WhatIf,
    WhatIfFailure,
    WhatIfRun,
    WhatIfTeam,
    WhatIfTier,
)
from watchtower.domain.tiers import Tier, TierPolicy

from .engine import JobOutcome, as_observed, replay
from .policy import NodeSpec, PolicyError, ReplayPolicy, policy_from_mapping
from .results import attainment, wait_figures
from .trace import TraceJob

OBSERVED, CONFIGURED = WHAT_IF_RESERVED
NO_JOBS = "no jobs were recorded for this week: nothing to replay"


def week_policy(
    name: str, mapping: Mapping[str, Any], tiers: Sequence[TierConfig], nodes: Sequence[NodeSpec] = ()
) -> ReplayPolicy:
    """Return the policy `mapping` describes, its tiers defaulting to `tiers` and its nodes to `nodes`.

    Raises PolicyError listing each problem with its key, ValueError when there are no nodes at all."""
    data: dict[str, Any] = {"tiers": list(tiers), **mapping, "name": name}
    if data.get("nodes") is None and nodes:
        data["nodes"] = list(nodes)
    policy = policy_from_mapping(data, name)
    if policy.nodes is None:
        raise ValueError("no nodes were recorded for the week and the policy names none (give it `nodes:`)")
    return policy


def policy_problems(name: str, mapping: Mapping[str, Any], tiers: Sequence[TierConfig]) -> list[str]:
    """Return each problem of a what-if policy ("path: what is wrong"); none when it is valid. Its nodes may
    be left out: the week's recorded inventory stands in."""
    try:
        week_policy(name, mapping, tiers, nodes=(NodeSpec(name="recorded", gpus=1),))
    except PolicyError as e:
        return list(e.problems)
    return []


def retier(jobs: Sequence[TraceJob], policy: ReplayPolicy, configured: TierPolicy) -> list[TraceJob]:
    """Return `jobs` as `policy`'s tiers read them (the module's docstring says how)."""
    tiers = policy.tier_policy()
    by_name = {t.name: t for t in tiers.tiers}
    before = {t.name: t.min_priority for t in configured.tiers}
    out = []
    for j in jobs:
        if (t := by_name.get(j.tier)) is not None:
            priority = j.priority + t.min_priority - before.get(j.tier, t.min_priority)
            out.append(j if priority == j.priority else replace(j, priority=priority))
        else:
            t = tiers.tier_of(j.priority)
            out.append(replace(j, tier=t.name, priority=t.min_priority))
    return out


def _observed(jobs: Sequence[TraceJob]) -> list[JobOutcome]:
    """The jobs that started, as they ran: each waiting from submission to its observed start."""
    return [as_observed(j, j.started) for j in jobs if j.started is not None]


def _by(jobs: Sequence[JobOutcome], key: Callable[[JobOutcome], str]) -> dict[str, list[JobOutcome]]:
    groups: dict[str, list[JobOutcome]] = {}
    for j in jobs:
        groups.setdefault(key(j), []).append(j)
    return groups


def _ran(jobs: Sequence[JobOutcome]) -> list[JobOutcome]:
    return [j for j in jobs if j.refused is None]


def what_if(
    jobs: Sequence[TraceJob],
    nodes: Sequence[NodeSpec],
    tiers: Sequence[TierConfig],
    policies: Sequence[tuple[str, Mapping[str, Any] | str]],
) -> WhatIf:
    """Return the section for a week's recorded `jobs` and `nodes` under the configuration's `tiers` and each
    (name, policy mapping) of `policies`."""
    names = tuple(name for name, _ in policies)
    if not jobs:
        return WhatIf(empty=NO_JOBS, policies=names)
    configured = TierPolicy.of(
        Tier(t.name, t.min_priority, t.warn_after, t.critical_after, frozenset(t.classes)) for t in tiers
    )
    runs: list[tuple[WhatIfRun, list[JobOutcome]]] = []
    failures: list[WhatIfFailure] = []
    seen = _observed(jobs)
    if seen:
        runs.append((_run(OBSERVED, "observed", seen, None), seen))
    every: list[tuple[str, Mapping[str, Any] | str, RunKind]] = [(CONFIGURED, {}, "configured")]
    every += [(n, m, "policy") for n, m in policies]
    for name, mapping, kind in every:
        if isinstance(mapping, str):  # settings made without loading them, which reads the files
            failures.append(
                WhatIfFailure(name, f"the policy file {mapping!r} was not read with the configuration")
            )
            continue
        try:
            policy = week_policy(name, mapping, tiers, nodes)
            outcomes = list(replay(retier(jobs, policy, configured), policy).jobs)
        except PolicyError as e:
            failures.append(WhatIfFailure(name, "; ".join(e.problems)))
            continue
        # Broad: whatever one replay does, the others and the report go on; the section says what it was.
        except Exception as e:
            failures.append(
                WhatIfFailure(name, str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}")
            )
            continue
        runs.append((_run(name, kind, outcomes, outcomes), outcomes))
    order = [t.name for t in configured.tiers]
    for _, outcomes in runs:
        order += [t for t in dict.fromkeys(j.tier for j in outcomes) if t not in order]
    return WhatIf(
        runs=tuple(r for r, _ in runs),
        tiers=tuple(t for t in (_tier(name, runs) for name in order) if t is not None),
        teams=_teams(runs),
        failures=tuple(failures),
        policies=names,
    )


def _run(
    name: str, kind: RunKind, outcomes: list[JobOutcome], replayed: list[JobOutcome] | None
) -> WhatIfRun:
    teams = _by(_ran(outcomes), lambda j: j.team)
    return WhatIfRun(
        name=name,
        kind=kind,
        jobs=len(outcomes),
        preemptions=sum(j.preemptions for j in replayed) if replayed is not None else None,
        gpu_hours_lost=sum(j.gpu_hours_lost for j in replayed) if replayed is not None else None,
        jain=jain_index({team: attainment(members) for team, members in teams.items()}),
    )


def _tier(name: str, runs: Sequence[tuple[WhatIfRun, list[JobOutcome]]]) -> WhatIfTier | None:
    figures = []
    for run, outcomes in runs:
        members = [j for j in outcomes if j.tier == name]
        w = wait_figures(j.waited for j in _ran(members))
        figures.append(TierFigures(run.name, len(members), w["p50"], w["p95"]))
    return WhatIfTier(name, tuple(figures)) if any(f.jobs for f in figures) else None


def _teams(runs: Sequence[tuple[WhatIfRun, list[JobOutcome]]]) -> tuple[WhatIfTeam, ...]:
    names = sorted({j.team for _, outcomes in runs for j in outcomes})
    out = []
    for team in names:
        base: tuple[float | None, float | None] = (None, None)
        figures = []
        for run, outcomes in runs:
            members = [j for j in outcomes if j.team == team]
            mean = wait_figures(j.waited for j in _ran(members))["mean"]
            att = attainment(members)
            if run.kind == "configured":
                base = (mean, att)
            figures.append((run, len(members), mean, att))
        out.append(
            WhatIfTeam(
                team,
                tuple(
                    TeamFigures(
                        run.name,
                        n,
                        mean,
                        att,
                        _change(mean, base[0]) if run.kind == "policy" else None,
                        _change(att, base[1]) if run.kind == "policy" else None,
                    )
                    for run, n, mean, att in figures
                ),
            )
        )
    return tuple(out)


def _change(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else value - base
