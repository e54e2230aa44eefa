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

The values it builds are in messages/types.py and the gang grammars in forms/gangs/messages.py; both are
re-exported here, where readers import them from.
"""

from __future__ import annotations

import re
from dataclasses import replace

from watchtower.domain.forms.dra.messages import PROBLEM_OF, dra_reason, dra_words
from watchtower.domain.forms.gangs.messages import (
    UPSTREAM_GROUP_UNSCHEDULABLE,
    VOLCANO_NO_FIT,
    gang_words,
    group_unschedulable,
    pod_group,
    volcano_gang,
    volcano_waits_for_gang,
)
from watchtower.domain.messages.types import (
    GANG_UNPLACEABLE,
    NO_VICTIMS,
    NOT_HELPFUL,
    PREEMPTION_WORDS,
    WAITS_FOR_GANG,
    PreemptionVerdict,
    ReasonCount,
    SchedulingDiagnosis,
    placement,
    preemption_note,
    read_verdict,
)

__all__ = [
    "GANG_UNPLACEABLE",
    "NO_NODES",
    "PREEMPTION_WORDS",
    "WAITS_FOR_GANG",
    "PreemptionVerdict",
    "ReasonCount",
    "SchedulingDiagnosis",
    "explain",
    "normalise_reason",
    "parse_scheduling_message",
    "preemption_note",
]

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
_KNOWN_PREFIXES = ("Insufficient ", "node(s) ", "Too many pods", NO_VICTIMS, NOT_HELPFUL)


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
    return dra_reason(t) or "other"


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
            # PreFilter's words carry no count (FitError adds them once for all nodes): DRA's are known.
            out.append(ReasonCount(dra_reason(piece) or "other", 0, piece.strip()))
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
        gang = pod_group(raw, text, truncated)
        if gang is not None:
            return gang
    elif (text[:1].isdigit() and " tasks in gang " in text[:40]) or text.startswith("pod group is "):
        if text == UPSTREAM_GROUP_UNSCHEDULABLE:
            return group_unschedulable(raw, text, truncated)
        read = volcano_gang(raw, text, truncated)
        if read is not None:
            return _with_origin(*read)
    elif text.startswith("Pod ") and " can possibly be assigned to " in text:
        return volcano_waits_for_gang(raw, text, truncated)
    head = _HEAD.match(text)
    if head is None:
        # A SchedulerError is the bare error, e.g. the DRA allocator's "claim ..., request ...: ...".
        dra = dra_reason(text)
        return SchedulingDiagnosis(
            raw,
            None,
            (ReasonCount(dra or "other", 0, text),),
            PreemptionVerdict.UNKNOWN,
            "",
            truncated,
            dra is not None,
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
    node, victims = placement(preemption)
    return SchedulingDiagnosis(
        raw, total, _merged(reasons), read_verdict(preemption), preemption, truncated, True, node, victims
    )


def _with_origin(gang: SchedulingDiagnosis, node_text: str) -> SchedulingDiagnosis:
    """Return a Volcano gang's diagnosis with its Origin task's per-node reasons added, when it has some."""
    if node_text and _HEAD.match(node_text):  # only a per-node text: never a gang message again
        inner = parse_scheduling_message(node_text)
        if inner.recognised:
            return replace(gang, total_nodes=inner.total_nodes, reasons=(*gang.reasons, *inner.reasons))
    return gang


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
            gang = gang_words(diag)
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
        elif r.reason in PROBLEM_OF:
            parts.append(dra_words(r.reason, n, r.text, gpus=gpus))
        elif r.reason == VOLCANO_NO_FIT:
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
