"""Reading the schedulers' FailedScheduling / PodScheduled=False / PodGroup condition messages.

kube-scheduler (pkg/scheduler/framework/types.go, FitError.Error):
    0/N nodes are available: <n> <reason>, <n> <reason>. preemption: <text>
or the bare ``no nodes available to schedule pods``; from 1.36 a PodGroup's condition carries the gang
plugin's status instead, ``minCount (<m>) cannot be satisfied...; pod group preemption: <text>``.
Volcano (volcano-sh/volcano pkg/scheduler/api/unschedule_info.go FitErrors.Error, job_info.go FitError,
plugins/gang/gang.go): ``0/N nodes are unavailable: <n> <reason>, ...`` on pods and
``<u>/<t> tasks in gang unschedulable: pod group is not ready, <n> Pending, <m> minAvailable; ...`` on
PodGroups. Reasons are sorted as strings by both. Events are cut at 1024 bytes with a trailing `` ...``.
Anything that does not fit is kept verbatim as reason ``other``: the parser never raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class PreemptionVerdict(StrEnum):
    POSSIBLE = "possible"  # the scheduler nominated a node / victims are terminating
    NO_VICTIMS = "no_victims"  # nodes would fit but hold no lower-priority pods to evict
    NOT_HELPFUL = "not_helpful"  # evicting would not make the pod fit anywhere
    POLICY_NEVER = "policy_never"  # the pod's preemptionPolicy is Never
    UNKNOWN = "unknown"


# The verdicts in words: the `why` of a waiting workload, its alerts and the status page all say them so.
PREEMPTION_WORDS: Mapping[PreemptionVerdict, str] = {
    PreemptionVerdict.POSSIBLE: "preemption is under way",
    PreemptionVerdict.NO_VICTIMS: "preemption cannot help: no lower-priority pods to evict",
    PreemptionVerdict.NOT_HELPFUL: "preemption cannot help: evicting would not make it fit",
    PreemptionVerdict.POLICY_NEVER: "preemption cannot help: its preemptionPolicy is Never",
    PreemptionVerdict.UNKNOWN: "the scheduler has said nothing about preemption",
}


def preemption_note(why: str, verdict: PreemptionVerdict) -> str:
    """Return the verdict in words, or "" when `why` (worded by `explain`) says it already."""
    words = PREEMPTION_WORDS[verdict]
    return "" if words in why else words


@dataclass(frozen=True, slots=True)
class ReasonCount:
    reason: str  # normalised: "Insufficient nvidia.com/gpu", "untolerated taint", ..., or "other"
    nodes: int  # how many nodes gave this reason (0 when the text carried no count)
    text: str  # the scheduler's words, verbatim


@dataclass(frozen=True, slots=True)
class SchedulingDiagnosis:
    raw: str
    total_nodes: int | None
    reasons: tuple[ReasonCount, ...]
    preemption: PreemptionVerdict
    preemption_text: str
    truncated: bool
    recognised: bool  # False when the text did not follow the scheduler's grammar
    # Where a found preemption puts the pod and how many it evicts (1.36+ wording; "" / None unsaid).
    preemption_node: str = ""
    victims: int | None = None
    # A gang's counts, when the message is about one: its minimum (minCount, Volcano's minAvailable)
    # and how many of its pods the scheduler could place (1.36: scheduled; Volcano: minimum - short).
    gang_min: int | None = None
    gang_placed: int | None = None

    def nodes_with(self, reason: str) -> int:
        return sum(r.nodes for r in self.reasons if r.reason == reason)


NO_NODES = "no nodes available to schedule pods"
# Counts are bounded: a 5,000-digit "count" in hostile text must not reach int() (it raises past 4,300).
# Volcano says "unavailable", may say "all nodes are unavailable" with no count, and may name the
# hyperNode it tried (pkg/scheduler/api/unschedule_info.go FitErrors.Error, AllNodeUnavailableMsg).
_HEAD = re.compile(
    r"^(?:In hyperNode [^:]{1,253}: )?(?:0/(\d{1,9}) nodes are (?:un)?available|all nodes are unavailable):?\s*"
)
_COUNTED = re.compile(r"^(\d{1,9}) (.+)$", re.DOTALL)
_PIECE_SPLIT = re.compile(r", (?=\d+ )")
# 1.18-1.24 "had taint {k: v}, that the pod didn't tolerate", 1.25+ "had untolerated taint {k: v}",
# aggregated "had untolerated taint(s)", and before 1.18 "had taints that the pod didn't tolerate".
_TAINT = re.compile(
    r"^node\(s\) had (?:untolerated )?taint(?:s|\(s\))?(?: \{[^}]*\})?"
    r"(?:,? that the pod didn't tolerate)?$"
)
_NO_VICTIMS = "No preemption victims found for incoming pod"
_NOT_HELPFUL = "Preemption is not helpful for scheduling"

# Older scheduler wordings folded into today's, so counts add up across versions.
_SYNONYMS = {
    "node(s) didn't match node selector": "node(s) didn't match Pod's node affinity/selector",
    "node(s) didn't match Pod's node affinity": "node(s) didn't match Pod's node affinity/selector",
    "node(s) didn't satisfy existing pods anti-affinity rules": "node(s) didn't satisfy existing pods anti-affinity rules",
    "node(s) were not ready": "node(s) were not ready",
    "node(s) were out of disk space": "node(s) were out of disk space",
    # Volcano's own words for the same causes (pkg/scheduler/api/unschedule_info.go).
    "node(s) pod number exceeded": "Too many pods",
}
# <= 1.20 InterPodAffinity (pkg/scheduler/framework/plugins/interpodaffinity/filtering.go) reported the
# umbrella ErrReasonAffinityNotMatch beside the specific reason on the same nodes: it names no cause of
# its own, so beside a specific one it is not counted (alone it is kept, the only words there are).
_AFFINITY_UMBRELLA = frozenset(
    {
        "node(s) didn't match pod affinity/anti-affinity",
        "node(s) didn't match pod affinity/anti-affinity rules",
    }
)
_AFFINITY_SPECIFIC = frozenset(
    {
        "node(s) didn't match pod affinity rules",
        "node(s) didn't match pod anti-affinity rules",
        "node(s) didn't satisfy existing pods anti-affinity rules",
    }
)
_KNOWN_PREFIXES = ("Insufficient ", "node(s) ", "Too many pods", _NO_VICTIMS, _NOT_HELPFUL)


def normalise_reason(text: str) -> str:
    """Return the reason a piece of scheduler text stands for; unknown wording gives "other"."""
    t = text.strip()
    if t.startswith("Insufficient "):
        return t
    if _TAINT.match(t) or t.startswith("node(s) had untolerated taint"):
        return "untolerated taint"
    if t in _SYNONYMS:
        return _SYNONYMS[t]
    if t.startswith(_KNOWN_PREFIXES):
        return t
    return "other"


def _split_pieces(body: str) -> list[ReasonCount]:
    body = body.strip()
    if body.endswith("."):
        body = body[:-1]
    if not body:
        return []
    out: list[ReasonCount] = []
    for piece in _PIECE_SPLIT.split(body):
        m = _COUNTED.match(piece.strip())
        if m:
            text = m.group(2).strip()
            out.append(ReasonCount(normalise_reason(text), int(m.group(1)), text))
        else:
            out.append(ReasonCount("other", 0, piece.strip()))
    return out


def _merged(reasons: list[ReasonCount]) -> tuple[ReasonCount, ...]:
    """Return the reasons in their order with one entry per known reason, nodes summed (taints of several
    keys are one reason: "untolerated taint"), and the <= 1.20 affinity umbrella dropped beside a
    specific reason. Unknown texts are kept apart: nothing says two of them are one cause."""
    if any(r.reason in _AFFINITY_SPECIFIC for r in reasons):
        reasons = [r for r in reasons if r.reason not in _AFFINITY_UMBRELLA]
    out: list[ReasonCount] = []
    at: dict[str, int] = {}
    for r in reasons:
        i = at.get(r.reason) if r.reason != "other" else None
        if i is None:
            at[r.reason] = len(out)
            out.append(r)
        else:
            seen = out[i]
            out[i] = ReasonCount(r.reason, seen.nodes + r.nodes, f"{seen.text}; {r.text}")
    return tuple(out)


# 1.36+ DefaultPreemption: "found a potential placement for pod on node <n>, preempting <k> victims";
# its PodGroupPostFilter: "found a placement for podgroup, preempting <k> victims" and "ongoing
# preemption on nominated nodes" (pkg/scheduler/framework/preemption/podgrouppreemption.go).
_PLACEMENT = re.compile(
    r"found a (?:potential )?placement for pod(?:group)?(?: on node ([^,\s]{1,253}))?, preempting (\d{1,9}) victims"
)
_ONGOING = "ongoing preemption on nominated nodes"
# The preemption dry run found no candidate and the scheduler repeats its per-node reasons
# (preemption.go Preempt: a FitError over the dry run's statuses): removing victims would not help.
_DRY_RUN_HEAD = re.compile(r"^0/\d{1,9} nodes are available")


def _verdict(preemption_text: str) -> PreemptionVerdict:
    p = preemption_text
    if not p:
        return PreemptionVerdict.UNKNOWN
    if "preemptionPolicy=Never" in p:
        return PreemptionVerdict.POLICY_NEVER
    if "terminating pod on the nominated node" in p or _ONGOING in p or _PLACEMENT.search(p):
        return PreemptionVerdict.POSSIBLE
    if _NO_VICTIMS in p or "No preemption victims found for incoming preemptor" in p:
        return PreemptionVerdict.NO_VICTIMS
    if _NOT_HELPFUL in p or _DRY_RUN_HEAD.match(p):
        return PreemptionVerdict.NOT_HELPFUL
    return PreemptionVerdict.UNKNOWN


def _placement(preemption_text: str) -> tuple[str, int | None]:
    """Return the node and victim count a found preemption names, ("", None) when it names none."""
    m = _PLACEMENT.search(preemption_text)
    return ("", None) if m is None else (m.group(1) or "", int(m.group(2)))


def _cut(raw: str) -> tuple[str, bool]:
    """Return the text without the ` ...` an event cut at 1024 bytes ends with, and whether it was cut."""
    text = raw.rstrip()
    truncated = text.endswith(" ...") or (
        len(raw.encode("utf-8", "replace")) >= 1020 and text.endswith("...")
    )
    if truncated:
        text = text[:-4] if text.endswith(" ...") else text[:-3]
    return text.strip(), truncated


def parse_scheduling_message(message: object) -> SchedulingDiagnosis:
    """Return what a scheduler message says: per-reason node counts and the preemption verdict."""
    raw = message if isinstance(message, str) else ("" if message is None else str(message))
    text, truncated = _cut(raw)
    if not text:
        return SchedulingDiagnosis(raw, None, (), PreemptionVerdict.UNKNOWN, "", truncated, False)
    if text.startswith(NO_NODES):
        return SchedulingDiagnosis(
            raw, 0, (ReasonCount("no nodes", 0, NO_NODES),), PreemptionVerdict.UNKNOWN, "", truncated, True
        )
    if text.startswith("minCount ("):
        gang = _pod_group(raw, text, truncated)
        if gang is not None:
            return gang
    elif text[:1].isdigit() and " tasks in gang " in text[:40]:
        gang = _volcano_gang(raw, text, truncated)
        if gang is not None:
            return gang
    elif text.startswith("Pod ") and " can possibly be assigned to " in text:
        return _volcano_waits_for_gang(raw, text, truncated)
    head = _HEAD.match(text)
    if head is None:
        return SchedulingDiagnosis(
            raw, None, (ReasonCount("other", 0, text),), PreemptionVerdict.UNKNOWN, "", truncated, False
        )
    total = int(head.group(1)) if head.group(1) is not None else None
    rest = text[head.end() :]
    body, sep, preemption = rest.partition(" preemption: ")
    if not sep and rest.startswith("preemption: "):
        body, preemption = "", rest[len("preemption: ") :]
    # The reasons end at ". "; post-filter plugins may add their own texts before the preemption verdict
    # (1.36 DRA: "... 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: ...").
    end = body.find(". ")
    post_filter = ""
    if end != -1:
        body, post_filter = body[: end + 1], body[end + 2 :]
    reasons = _split_pieces(body)
    if truncated and reasons and not preemption and not post_filter:
        # The last piece was cut mid-word: keep it, but never as a known reason.
        last = reasons[-1]
        reasons[-1] = ReasonCount("other", last.nodes, last.text)
    preemption = preemption.strip()
    node, victims = _placement(preemption)
    return SchedulingDiagnosis(
        raw, total, _merged(reasons), _verdict(preemption), preemption, truncated, True, node, victims
    )


# The 1.36 GangScheduling plugin's PlacementFeasible status, which a PodGroup's PodGroupInitiallyScheduled
# condition carries with no "0/N nodes" head: "minCount (<m>) cannot be satisfied: <s> scheduled, <r>
# remaining" (or "is not yet satisfied"), then "; pod group preemption: <verdict>"
# (pkg/scheduler/framework/plugins/gangscheduling, plugins/defaultpreemption PodGroupPostFilter).
_MIN_COUNT = re.compile(
    r"^minCount \((\d{1,9})\) (cannot be satisfied|is not yet satisfied)"
    r"(?:: (\d{1,9}) scheduled, (\d{1,9}) remaining)?"
)
GANG_UNPLACEABLE = "gang cannot be placed"


def _pod_group(raw: str, text: str, truncated: bool) -> SchedulingDiagnosis | None:
    m = _MIN_COUNT.match(text)
    if m is None:
        return None
    _, _, preemption = text.partition("pod group preemption: ")
    preemption = preemption.strip()
    node, victims = _placement(preemption)
    head = text.partition(";")[0].strip()
    return SchedulingDiagnosis(
        raw,
        None,
        (ReasonCount(GANG_UNPLACEABLE, 0, head),),
        _verdict(preemption),
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
# Pending: <n> Schedulable, <n> Unschedulable. Origin reason is <task>: <FitErrors of that task>".
_VOLCANO_GANG = re.compile(r"^(\d{1,9})/(\d{1,9}) tasks in gang unschedulable: pod group is (?:not )?ready, ")
_HISTOGRAM_PIECE = re.compile(r"^(\d{1,9}) (\S+)$")
# Tasks Volcano counts as placed for the gang (api/job_info.go ReadyTaskNum); Pending ones it could
# place are the Pending histogram's "Schedulable" (api/unschedule_info.go PodReasonSchedulable).
_VOLCANO_NO_FIT = "node(s) resource fit failed"  # api/unschedule_info.go NodeResourceFitFailed
_PLACED_STATUSES = frozenset({"Allocated", "Binding", "Bound", "Running", "Succeeded"})
_ORIGIN = re.compile(r"\. Origin reason is(?: [^:]{1,253})?: ")


def _histogram(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for piece in text.split(", "):
        m = _HISTOGRAM_PIECE.match(piece.strip().rstrip("."))
        if m:
            out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
    return out


def _volcano_gang(raw: str, text: str, truncated: bool) -> SchedulingDiagnosis | None:
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
    total: int | None = None
    reasons: list[ReasonCount] = [gang]
    if node_text and _HEAD.match(node_text):  # only a per-node text: never a gang message again
        inner = parse_scheduling_message(node_text)
        if inner.recognised:
            total, reasons = inner.total_nodes, [gang, *inner.reasons]
    return SchedulingDiagnosis(
        raw,
        total,
        tuple(reasons),
        PreemptionVerdict.UNKNOWN,
        "",
        truncated,
        True,
        gang_min=hist.get("minAvailable"),
        gang_placed=placed,
    )


# A Volcano pod that fits but waits for the rest of its gang (api/job_info.go TaskSchedulingReason):
# "Pod <ns>/<name> can possibly be assigned to <node>, once minAvailable is satisfied", or, when it
# waits for resources being released (pipelined, victims evicted), "..., once resource is released and
# minAvailable is satisfied".
_VOLCANO_FITS = re.compile(
    r"^Pod \S{1,600} can possibly be assigned to ([^,\s]{1,253}), once (resource is released and )?"
)
WAITS_FOR_GANG = "waits for its gang"


def _volcano_waits_for_gang(raw: str, text: str, truncated: bool) -> SchedulingDiagnosis:
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


def _gang_words(diag: SchedulingDiagnosis) -> str:
    g = diag.gang_min
    if diag.reasons and diag.reasons[0].reason == WAITS_FOR_GANG:
        return f"fits on node {diag.preemption_node} but waits for the rest of its gang to fit"
    if g is None:
        return "its gang cannot be placed together"
    placed = "" if diag.gang_placed is None else f" (only {diag.gang_placed} placed)"
    return f"its gang cannot be placed: the scheduler cannot fit the minimum of {g} pod{'' if g == 1 else 's'} together{placed}"


def explain(diag: SchedulingDiagnosis, *, gpus: int = 0, verdict: PreemptionVerdict | None = None) -> str:
    """Return a plain-words sentence for why a pod waits, for people, not parsers.

    `verdict` overrides the message's own (the pod's nominatedNodeName or preemptionPolicy know better)."""
    if not diag.raw.strip():
        return "waiting for the scheduler to try it"
    if diag.total_nodes == 0:
        return "the cluster has no nodes the scheduler can use"
    gang = ""
    parts: list[str] = []
    for r in diag.reasons:
        n = r.nodes
        one = n == 1
        nodes = f"{n} node{'' if one else 's'}"
        if r.reason in (GANG_UNPLACEABLE, WAITS_FOR_GANG):
            gang = _gang_words(diag)
        elif r.reason == "Insufficient nvidia.com/gpu":
            want = f"{gpus} free GPU{'' if gpus == 1 else 's'}" if gpus else "enough free GPUs"
            parts.append(f"{nodes} {'lacks' if one else 'lack'} {want}")
        elif r.reason.startswith("Insufficient "):
            parts.append(f"{nodes} {'lacks' if one else 'lack'} {r.reason.removeprefix('Insufficient ')}")
        elif r.reason == "untolerated taint":
            parts.append(f"{nodes} {'has' if one else 'have'} a taint the pod does not tolerate")
        elif r.reason == "node(s) didn't match Pod's node affinity/selector":
            parts.append(f"{nodes} {'does' if one else 'do'} not match its node selector/affinity")
        elif r.reason == "node(s) were unschedulable":
            parts.append(f"{nodes} {'is' if one else 'are'} cordoned")
        elif r.reason == "Too many pods":
            parts.append(f"{nodes} {'is' if one else 'are'} full (pod count)")
        elif r.reason == _VOLCANO_NO_FIT:
            parts.append(f"{nodes} {'lacks' if one else 'lack'} the resources it requests")
        else:
            parts.append(f"{r.nodes} × {r.text}" if r.nodes else r.text)
    out = "; ".join(parts) if parts else ("" if gang else diag.raw.strip())
    if diag.total_nodes is not None or (parts and _HEAD.match(diag.raw.strip()) is not None):
        tried = f" ({diag.total_nodes} tried)" if diag.total_nodes is not None else ""
        out = f"no node fits{tried}: {out}"
    if gang:
        out = f"{gang}; {out}" if out else gang
    v = verdict if verdict is not None else diag.preemption
    # An unknown verdict is no news: the sentence says nothing about preemption then.
    words = PREEMPTION_WORDS[v] if v is not PreemptionVerdict.UNKNOWN else ""
    if words:
        out += f"; {words}"
        if v is PreemptionVerdict.POSSIBLE and diag.victims is not None:
            k = diag.victims
            on = f" on node {diag.preemption_node}" if diag.preemption_node else ""
            out += f" (evicting {k} pod{'' if k == 1 else 's'}{on})"
    if diag.truncated:
        out += " (message truncated)"
    return out
