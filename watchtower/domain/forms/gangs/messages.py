"""The gang grammars: a 1.36 PodGroup's condition and Volcano's PodGroup and pod messages.

Neither has the `0/N nodes` head of kube-scheduler's per-node grammar (messages/scheduler.py), which dispatches
here on the first words; a Volcano gang message may end in an Origin task's per-node text, handed back
for messages/scheduler.py to read.
"""

from __future__ import annotations

import re

from watchtower.domain.messages.types import (
    GANG_UNPLACEABLE,
    WAITS_FOR_GANG,
    PreemptionVerdict,
    ReasonCount,
    SchedulingDiagnosis,
    placement,
    read_verdict,
)

# The 1.36 GangScheduling plugin's PlacementFeasible status, which a PodGroup's PodGroupInitiallyScheduled
# condition carries with no "0/N nodes" head: "minCount (<m>) cannot be satisfied: <s> scheduled, <r>
# remaining" (or "is not yet satisfied"), then "; pod group preemption: <verdict>"
# (pkg/scheduler/framework/plugins/gangscheduling, plugins/defaultpreemption PodGroupPostFilter).
_MIN_COUNT = re.compile(
    r"^minCount \((\d{1,9})\) (cannot be satisfied|is not yet satisfied)"
    r"(?:: (\d{1,9}) scheduled, (\d{1,9}) remaining)?"
)


def pod_group(raw: str, text: str, truncated: bool) -> SchedulingDiagnosis | None:
    """Return what a PodGroup's `minCount (<m>) ...` condition says; None when it is not that grammar."""
    m = _MIN_COUNT.match(text)
    if m is None:
        return None
    _, _, preemption = text.partition("pod group preemption: ")
    preemption = preemption.strip()
    node, victims = placement(preemption)
    head = text.partition(";")[0].strip()
    return SchedulingDiagnosis(
        raw,
        None,
        (ReasonCount(GANG_UNPLACEABLE, 0, head),),
        read_verdict(preemption),
        preemption,
        truncated,
        True,
        node,
        victims,
        gang_min=int(m.group(1)),
        gang_placed=int(m.group(3)) if m.group(3) is not None else None,
    )


# Volcano's PodGroup condition / event (plugins/gang/gang.go, cache/cache.go, api/job_info.go FitError):
# "<u>/<t> tasks in gang unschedulable: pod group is not ready, <n> <status>, ..., <m> minAvailable;
# Pending: <n> Schedulable, <n> Unschedulable. Origin reason is <task>: <FitErrors of that task>". Its pods'
# PodScheduled message is the same without the "<u>/<t> tasks in gang unschedulable: " head (captured from a
# real vc-scheduler: tests/fixtures/real/volcano-real-podgroup-pending.json).
_VOLCANO_GANG = re.compile(
    r"^(?:(\d{1,9})/(\d{1,9}) tasks in gang unschedulable: )?pod group is (?:not )?ready, "
)
# A 1.36 PodGroup's PodGroupScheduled=False message, also a FailedScheduling event of its pods, with nothing
# more (the status of the pod-group cycle: tests/fixtures/real/k8s-gang-preemption.json).
UPSTREAM_GROUP_UNSCHEDULABLE = "pod group is unschedulable"
_HISTOGRAM_PIECE = re.compile(r"^(\d{1,9}) (\S+)$")
# Tasks Volcano counts as placed for the gang (api/job_info.go ReadyTaskNum); Pending ones it could
# place are the Pending histogram's "Schedulable" (api/unschedule_info.go PodReasonSchedulable).
VOLCANO_NO_FIT = "node(s) resource fit failed"  # api/unschedule_info.go NodeResourceFitFailed
_PLACED_STATUSES = frozenset({"Allocated", "Binding", "Bound", "Running", "Succeeded"})
_ORIGIN = re.compile(r"\. Origin reason is(?: [^:]{1,253})?: ")


def _histogram(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for piece in text.split(", "):
        m = _HISTOGRAM_PIECE.match(piece.strip().rstrip("."))
        if m:
            out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
    return out


def volcano_gang(raw: str, text: str, truncated: bool) -> tuple[SchedulingDiagnosis, str] | None:
    """Return what a Volcano `<u>/<t> tasks in gang unschedulable` message says of the gang, and its Origin
    task's per-node text ("" when it has none); None when it is not that grammar."""
    m = _VOLCANO_GANG.match(text)
    if m is None:
        return None
    rest = text[m.end() :]
    origin = _ORIGIN.search(rest)
    counts_text, node_text = (rest, "") if origin is None else (rest[: origin.start()], rest[origin.end() :])
    statuses, _, pending = counts_text.partition("; Pending: ")
    hist = _histogram(statuses)
    placed = sum(n for s, n in hist.items() if s in _PLACED_STATUSES) + _histogram(pending).get(
        "Schedulable", 0
    )
    gang = ReasonCount(GANG_UNPLACEABLE, 0, text[: m.end() + len(counts_text)].strip())
    diag = SchedulingDiagnosis(
        raw,
        None,
        (gang,),
        PreemptionVerdict.UNKNOWN,
        "",
        truncated,
        True,
        gang_min=hist.get("minAvailable"),
        gang_placed=placed,
    )
    return diag, node_text


# A Volcano pod that fits but waits for the rest of its gang (api/job_info.go TaskSchedulingReason):
# "Pod <ns>/<name> can possibly be assigned to <node>, once minAvailable is satisfied", or, when it
# waits for resources being released (pipelined, victims evicted), "..., once resource is released and
# minAvailable is satisfied".
_VOLCANO_FITS = re.compile(
    r"^Pod \S{1,600} can possibly be assigned to ([^,\s]{1,253}), once (resource is released and )?"
)


def group_unschedulable(raw: str, text: str, truncated: bool) -> SchedulingDiagnosis:
    """Return what a bare `pod group is unschedulable` says: the gang as a whole does not fit."""
    return SchedulingDiagnosis(
        raw, None, (ReasonCount(GANG_UNPLACEABLE, 0, text),), PreemptionVerdict.UNKNOWN, "", truncated, True
    )


def volcano_waits_for_gang(raw: str, text: str, truncated: bool) -> SchedulingDiagnosis:
    """Return what a Volcano `Pod ... can possibly be assigned to <node>` message says (unrecognised if not)."""
    m = _VOLCANO_FITS.match(text)
    if m is None:
        return SchedulingDiagnosis(
            raw, None, (ReasonCount("other", 0, text),), PreemptionVerdict.UNKNOWN, "", truncated, False
        )
    released = m.group(2) is not None
    return SchedulingDiagnosis(
        raw,
        None,
        (ReasonCount(WAITS_FOR_GANG, 0, text),),
        PreemptionVerdict.POSSIBLE if released else PreemptionVerdict.UNKNOWN,
        "",
        truncated,
        True,
        m.group(1),
    )


def gang_words(diag: SchedulingDiagnosis) -> str:
    """Return the gang part of `explain`'s sentence for a diagnosis about a gang."""
    g = diag.gang_min
    if diag.reasons and diag.reasons[0].reason == WAITS_FOR_GANG:
        return f"fits on node {diag.preemption_node} but waits for the rest of its gang to fit"
    if g is None:
        return "its gang cannot be placed together"
    placed = "" if diag.gang_placed is None else f" (only {diag.gang_placed} placed)"
    return f"its gang cannot be placed: the scheduler cannot fit the minimum of {g} pod{'' if g == 1 else 's'} together{placed}"
