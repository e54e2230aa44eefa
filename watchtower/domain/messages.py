"""Reading kube-scheduler's FailedScheduling / PodScheduled=False messages.

Grammar (pkg/scheduler/framework/types.go, FitError.Error):
    0/N nodes are available: <n> <reason>, <n> <reason>. preemption: <text>
or the bare ``no nodes available to schedule pods``. Reasons are sorted as strings by the scheduler.
Events are cut at 1024 bytes with a trailing `` ...``. Anything that does not fit is kept verbatim as
reason ``other``: the parser never raises.
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

    def nodes_with(self, reason: str) -> int:
        return sum(r.nodes for r in self.reasons if r.reason == reason)


NO_NODES = "no nodes available to schedule pods"
# Counts are bounded: a 5,000-digit "count" in hostile text must not reach int() (it raises past 4,300).
_HEAD = re.compile(r"^0/(\d{1,9}) nodes are available:?\s*")
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
    "node(s) didn't match pod affinity/anti-affinity": "node(s) didn't match pod affinity rules",
    "node(s) didn't satisfy existing pods anti-affinity rules": "node(s) didn't satisfy existing pods anti-affinity rules",
    "node(s) were not ready": "node(s) were not ready",
    "node(s) were out of disk space": "node(s) were out of disk space",
}
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


def _verdict(preemption_text: str) -> PreemptionVerdict:
    p = preemption_text
    if not p:
        return PreemptionVerdict.UNKNOWN
    if "preemptionPolicy=Never" in p:
        return PreemptionVerdict.POLICY_NEVER
    if "terminating pod on the nominated node" in p:
        return PreemptionVerdict.POSSIBLE
    if _NO_VICTIMS in p or "No preemption victims found for incoming preemptor" in p:
        return PreemptionVerdict.NO_VICTIMS
    if _NOT_HELPFUL in p:
        return PreemptionVerdict.NOT_HELPFUL
    return PreemptionVerdict.UNKNOWN


def parse_scheduling_message(message: object) -> SchedulingDiagnosis:
    """Return what a scheduler message says: per-reason node counts and the preemption verdict."""
    raw = message if isinstance(message, str) else ("" if message is None else str(message))
    text = raw.rstrip()
    truncated = text.endswith(" ...") or (
        len(raw.encode("utf-8", "replace")) >= 1020 and text.endswith("...")
    )
    if truncated:
        text = text[:-4] if text.endswith(" ...") else text[:-3]
    text = text.strip()
    if not text:
        return SchedulingDiagnosis(raw, None, (), PreemptionVerdict.UNKNOWN, "", truncated, False)
    if text.startswith(NO_NODES):
        return SchedulingDiagnosis(
            raw, 0, (ReasonCount("no nodes", 0, NO_NODES),), PreemptionVerdict.UNKNOWN, "", truncated, True
        )
    head = _HEAD.match(text)
    if head is None:
        return SchedulingDiagnosis(
            raw, None, (ReasonCount("other", 0, text),), PreemptionVerdict.UNKNOWN, "", truncated, False
        )
    total = int(head.group(1))
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
    return SchedulingDiagnosis(
        raw, total, tuple(reasons), _verdict(preemption), preemption.strip(), truncated, True
    )


def explain(diag: SchedulingDiagnosis, *, gpus: int = 0, verdict: PreemptionVerdict | None = None) -> str:
    """Return a plain-words sentence for why a pod waits, for people, not parsers.

    `verdict` overrides the message's own (the pod's nominatedNodeName or preemptionPolicy know better)."""
    if not diag.raw.strip():
        return "waiting for the scheduler to try it"
    if diag.total_nodes == 0:
        return "the cluster has no nodes the scheduler can use"
    parts: list[str] = []
    for r in diag.reasons:
        n = r.nodes
        one = n == 1
        nodes = f"{n} node{'' if one else 's'}"
        if r.reason == "Insufficient nvidia.com/gpu":
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
        else:
            parts.append(f"{r.nodes} × {r.text}" if r.nodes else r.text)
    out = "; ".join(parts) if parts else diag.raw.strip()
    if diag.total_nodes is not None:
        out = f"no node fits ({diag.total_nodes} tried): {out}"
    v = verdict if verdict is not None else diag.preemption
    # An unknown verdict is no news: the sentence says nothing about preemption then.
    words = PREEMPTION_WORDS[v] if v is not PreemptionVerdict.UNKNOWN else ""
    if words:
        out += f"; {words}"
    if diag.truncated:
        out += " (message truncated)"
    return out
