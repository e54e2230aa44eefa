"""What a scheduler message is read into, and the preemption suffix both grammars share.

messages/scheduler.py reads kube-scheduler's per-node grammar, forms/gangs/messages.py the PodGroup and Volcano gang
grammars; both build these values and end in the same `preemption: <text>` verdicts.
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


GANG_UNPLACEABLE = "gang cannot be placed"
WAITS_FOR_GANG = "waits for its gang"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"

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


def read_verdict(preemption_text: str) -> PreemptionVerdict:
    """Return the verdict the text after `preemption: ` gives; UNKNOWN when it gives none."""
    p = preemption_text
    if not p:
        return PreemptionVerdict.UNKNOWN
    if "preemptionPolicy=Never" in p:
        return PreemptionVerdict.POLICY_NEVER
    if "terminating pod on the nominated node" in p or _ONGOING in p or _PLACEMENT.search(p):
        return PreemptionVerdict.POSSIBLE
    if NO_VICTIMS in p or "No preemption victims found for incoming preemptor" in p:
        return PreemptionVerdict.NO_VICTIMS
    if NOT_HELPFUL in p or _DRY_RUN_HEAD.match(p):
        return PreemptionVerdict.NOT_HELPFUL
    return PreemptionVerdict.UNKNOWN


def placement(preemption_text: str) -> tuple[str, int | None]:
    """Return the node and victim count a found preemption names, ("", None) when it names none."""
    m = _PLACEMENT.search(preemption_text)
    return ("", None) if m is None else (m.group(1) or "", int(m.group(2)))
