"""Policy replay as the command line and the service run it: policy files and a trace read from text, each
policy replayed, and one document of every run side by side (docs/json.md, "The replay JSON").

The engine and its parsers (watchtower.replay) are pure and take parsed data; this module is where text
becomes that data, each mistake becoming a `ReplayInputError` that names the file (the trace's row, the
policy's key), as `check-config` names a configuration's.

The trace is read once per policy, because each policy's tiers decide a row's tier and priority (a policy
that raises a tier's priority replays that tier's jobs at the new value). `open_trace` hands over a fresh
iterable of its lines each time, so a file is never held whole: the parser's row cap refuses a huge one as it
reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from watchtower.config.model import TierConfig
from watchtower.domain.tiers import TierPolicy
from watchtower.replay.engine import Replay, as_observed, replay
from watchtower.replay.policy import NodeSpec, PolicyError, ReplayPolicy, policy_from_mapping
from watchtower.replay.results import summarise, wait_figures
from watchtower.replay.trace import MAX_ROWS, Trace, TraceError, TraceJob, parse_csv, parse_jsonl
from watchtower.replay.what_if import retier

SCHEMA_VERSION = 1


class ReplayInputError(ValueError):
    """A trace or a policy that cannot be replayed; `problems` lists each ("line 3, column tier: ...",
    "preemption.medium: unknown tier ...")."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source, self.problems = source, list(problems)
        super().__init__(f"{source}: " + "; ".join(self.problems))


@dataclass(frozen=True, slots=True)
class NamedPolicy:
    source: str  # where it was read from, for the errors: a file name, "policies[1]"
    policy: ReplayPolicy


def read_policy(
    text: str,
    source: str,
    *,
    default_name: str,
    default_nodes: Sequence[NodeSpec] = (),
    default_tiers: Sequence[TierConfig] = (),
) -> NamedPolicy:
    """Return the policy a YAML (or JSON) text describes, named `default_name` unless it says `name:`;
    raise ReplayInputError naming `source` and every problem's key. A policy without `nodes` takes
    `default_nodes` (a recorded week's inventory) when there are any."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ReplayInputError(source, [f"{where}not valid YAML: {problem}"]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ReplayInputError(source, [f"(top level): a mapping is expected, not {type(data).__name__}"])
    data = {"name": default_name, **data}
    if "tiers" not in data and default_tiers:
        data["tiers"] = list(default_tiers)
    try:
        policy = policy_from_mapping(data, source)
    except PolicyError as e:
        raise ReplayInputError(source, e.problems) from None
    if policy.nodes is None and default_nodes:
        policy = policy.model_copy(update={"nodes": list(default_nodes)})
    if policy.nodes is None:
        raise ReplayInputError(
            source, ["nodes: missing: the trace carries no nodes; add e.g. `nodes: {count: 16, gpus: 8}`"]
        )
    return NamedPolicy(source, policy)


def unique_names(policies: Sequence[NamedPolicy]) -> None:
    """Raise ReplayInputError when two policies (or a policy and the observed run) share a name: the
    results are told apart by it."""
    seen: dict[str, str] = {"observed": "the observed run"}
    for p in policies:
        if p.policy.name in seen:
            raise ReplayInputError(
                p.source,
                [f"name: {p.policy.name!r} is already the name of {seen[p.policy.name]}; give each a name"],
            )
        seen[p.policy.name] = p.source


def parse_trace(lines: Iterable[str], policy: ReplayPolicy, *, max_rows: int = MAX_ROWS) -> Trace:
    """Return the trace's jobs under `policy`'s tiers: JSON lines when its first non-blank line is an
    object, CSV otherwise. Raise TraceError naming the row."""
    it = iter(lines)
    head: list[str] = []
    for line in it:
        head.append(line)
        if line.strip():
            break
    rest: Iterator[str] = itertools.chain(head, it)
    if head and head[-1].lstrip().startswith("{"):
        return parse_jsonl(rest, policy.tier_policy(), max_rows=max_rows)
    return parse_csv(rest, policy.tier_policy(), max_rows=max_rows)


def count_rows(text: str) -> int:
    """Return the rows of a trace text (its non-blank lines, less a CSV's header): what a request is
    refused by before any parsing."""
    rows = sum(1 for line in text.splitlines() if line.strip())
    first = next((line for line in text.splitlines() if line.strip()), "")
    return rows if first.lstrip().startswith("{") else max(rows - 1, 0)


def observed_run(jobs: Sequence[TraceJob], capacity_gpus: int) -> Replay | None:
    """Return what the trace says happened, as a run: the jobs with an observed start (the others are left
    out), each waiting from submission to start and running its duration, never preempted; None when no job
    carries `started`. The utilisation is over `capacity_gpus` (the first policy's nodes)."""
    seen = [j for j in jobs if j.started is not None]
    if not seen:
        return None
    out = []
    busy = 0.0
    for j in seen:
        assert j.started is not None
        busy += j.gpus * j.duration
        out.append(as_observed(j, j.started))
    return Replay(
        policy="observed",
        jobs=tuple(out),
        capacity_gpus=capacity_gpus,
        start=min(j.submitted for j in seen),
        end=max(j.started + j.duration for j in seen if j.started is not None),
        busy_gpu_seconds=busy,
    )


def fidelity(jobs: Sequence[TraceJob], run: Replay, tier_order: Sequence[str]) -> dict[str, Any] | None:
    """Return, per tier, the observed and the replayed p50 and p95 wait of the same jobs: those with an
    observed start that the replay started too, each side's wait to the job's first start (an observed
    start is a first start). What is left out is counted: jobs without an observed start, and jobs the
    replay refused or never started. None when no job carries `started`."""
    outcome = {o.id: o for o in run.jobs}
    seen = [j for j in jobs if j.started is not None]
    if not seen:
        return None
    both = [j for j in seen if (o := outcome.get(j.id)) is not None and o.started is not None]
    tiers = []
    for name in tier_order:
        mine = [j for j in both if j.tier == name]
        if not mine:
            continue
        observed = wait_figures(j.started - j.submitted for j in mine if j.started is not None)
        replayed = wait_figures(
            started - j.submitted for j in mine if (started := outcome[j.id].started) is not None
        )
        tiers.append(
            {
                "tier": name,
                "jobs": len(mine),
                "observed": {k: observed[k] for k in ("p50", "p95")},
                "replayed": {k: replayed[k] for k in ("p50", "p95")},
            }
        )
    return {
        "policy": run.policy,
        "jobs": len(both),
        "left_out": {
            "without an observed start": len(jobs) - len(seen),
            "not started by the replay": len(seen) - len(both),
        },
        "tiers": tiers,
    }


def _run_dict(run: Replay, kind: str, tier_order: Sequence[str]) -> dict[str, Any]:
    figures = summarise(run, tier_order)
    name = figures.pop("policy")
    return {"name": name, "kind": kind, **figures}


def replay_document(
    open_trace: Callable[[], Iterable[str]],
    policies: Sequence[NamedPolicy],
    *,
    trace_source: str = "trace",
    max_rows: int = MAX_ROWS,
    recorded: tuple[Sequence[TraceJob], TierPolicy] | None = None,
) -> dict[str, Any]:
    """Return the document of a replay: the trace's counts, the observed run (when the trace carries
    `started`) and each policy's run, in the order given. Raise ReplayInputError naming `trace_source` and
    the row for a bad trace, or a policy and its key.

    `recorded`: a week the service recorded, its jobs with the tiers they were recorded under (`open_trace`
    is not read). Each policy reads them as the weekly report's What if does (replay/what_if.py `retier`): a
    tier the policy keeps moves its jobs' priorities by as much as the policy moves its minimum, so the
    same policy gives the same figures in `watchtower replay --week` and in the report."""
    if not policies:
        raise ReplayInputError("policy", ["give at least one policy"])
    unique_names(policies)
    runs: list[dict[str, Any]] = []
    first: Trace | None = None
    close: dict[str, Any] | None = None
    for p in policies:
        if recorded is not None:
            trace = Trace(tuple(retier(recorded[0], p.policy, recorded[1])), {})
        else:
            try:
                trace = parse_trace(open_trace(), p.policy, max_rows=max_rows)
            except TraceError as e:
                where = trace_source if p is policies[0] else f"{trace_source} (under {p.source}'s tiers)"
                raise ReplayInputError(where, [str(e)]) from None
        order = [t.name for t in p.policy.tier_policy().tiers]
        if first is None:
            first = trace
            capacity = sum(n.gpus for n in p.policy.node_list())
            if (seen := observed_run(trace.jobs, capacity)) is not None:
                runs.append(_run_dict(seen, "observed", order))
        run = replay(trace.jobs, p.policy)
        if p is policies[0]:
            close = fidelity(trace.jobs, run, order)
        runs.append(_run_dict(run, "replayed", order))
    assert first is not None
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": {
            "jobs": len(first.jobs),
            "observed_jobs": sum(1 for j in first.jobs if j.started is not None),
            "skipped": dict(first.skipped),
        },
        "runs": runs,
        **({"fidelity": close} if close is not None else {}),
    }
