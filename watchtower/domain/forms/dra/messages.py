"""The DynamicResources scheduler plugin's words: a GPU shortage through DRA, or a claim/class problem.

Each text is the v1.36.3 source's (kubernetes pkg/scheduler/framework/plugins/dynamicresources/
dynamicresources.go; k8s.io/dynamic-resource-allocation resourceclaim/resourceclaim.go and
structured/internal/stable/allocator_stable.go; pkg/scheduler/util/assumecache NotFoundError):
- per node, in the `0/N nodes are available: <n> <reason>` list: "cannot allocate all claims" (no
  free devices match on that node), "resourceclaim not available on the node" (the claim is allocated
  on other nodes), "resourceclaim in use" (reserved by other pods);
- from PreFilter, uncounted: `could not find ResourceClaim "<ns>/<name>"`, `pod "<ns>/<pod>":
  ResourceClaim not created yet`, `resourceclaim "<name>" is being deleted`, `ResourceClaim <ns>/<name>
  was not created for Pod ...`, `request <r>: device class <c> does not exist`, `resource claim <ns>/<n>
  is in the process of being allocated`;
- as a SchedulerError, the allocator's own: `claim <ns>/<n>, request <r>: could not retrieve device
  class <c>: ...`, `class <c>: selector #<i>: CEL compile error: ...`, CEL runtime errors.
"""

from __future__ import annotations

from enum import StrEnum


class DraProblem(StrEnum):
    SHORTAGE = "shortage"  # the claim's devices are not free: GPUs are short
    CONFIG = "config"  # a claim, template or class is missing or wrong: no capacity will help
    PENDING = "pending"  # an allocation is under way


# Normalised reasons (ReasonCount.reason) and the words `explain` says for them.
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"
IN_USE = "resourceclaim in use"
CLAIM_MISSING = "ResourceClaim not found"
CLAIM_NOT_CREATED = "ResourceClaim not created yet"
CLAIM_DELETING = "ResourceClaim is being deleted"
CLAIM_NOT_OWNED = "ResourceClaim not created for the pod"
CLASS_MISSING = "DeviceClass does not exist"
CEL_ERROR = "DeviceClass or claim selector error"
ALLOCATING = "ResourceClaim being allocated"

PROBLEM_OF: dict[str, DraProblem] = {
    CANNOT_ALLOCATE: DraProblem.SHORTAGE,
    NOT_ON_NODE: DraProblem.SHORTAGE,
    IN_USE: DraProblem.SHORTAGE,
    CLAIM_MISSING: DraProblem.CONFIG,
    CLAIM_NOT_CREATED: DraProblem.CONFIG,
    CLAIM_DELETING: DraProblem.CONFIG,
    CLAIM_NOT_OWNED: DraProblem.CONFIG,
    CLASS_MISSING: DraProblem.CONFIG,
    CEL_ERROR: DraProblem.CONFIG,
    ALLOCATING: DraProblem.PENDING,
}

# (substring of the scheduler's text, its reason); the first that matches wins.
_WORDS: tuple[tuple[str, str], ...] = (
    (CANNOT_ALLOCATE, CANNOT_ALLOCATE),
    (NOT_ON_NODE, NOT_ON_NODE),
    (IN_USE, IN_USE),
    ("could not find ResourceClaim ", CLAIM_MISSING),
    ("ResourceClaim not created yet", CLAIM_NOT_CREATED),
    ("is being deleted", CLAIM_DELETING),
    ("was not created for Pod", CLAIM_NOT_OWNED),
    ("is not in the same namespace as Pod", CLAIM_NOT_OWNED),
    ("could not retrieve device class", CLASS_MISSING),
    ("does not exist", CLASS_MISSING),
    ("CEL compile error", CEL_ERROR),
    ("CEL runtime error", CEL_ERROR),
    ("is in the process of being allocated", ALLOCATING),
)
_CLAIMISH = ("claim", "Claim", "device class", "DeviceClass", "class ")


def dra_reason(text: str) -> str | None:
    """Return the DRA reason a piece of scheduler text gives; None when it is not the DRA plugin's."""
    t = text.strip()
    if not any(w in t for w in _CLAIMISH):
        return None
    for words, reason in _WORDS:
        if words in t:
            return reason
    return None


def problem_of(reasons: tuple[str, ...]) -> DraProblem | None:
    """Return what the DRA reasons of a message amount to: a configuration problem outweighs a shortage."""
    found = {PROBLEM_OF[r] for r in reasons if r in PROBLEM_OF}
    for p in (DraProblem.CONFIG, DraProblem.SHORTAGE, DraProblem.PENDING):
        if p in found:
            return p
    return None


def dra_words(reason: str, nodes: int, text: str, *, gpus: int = 0) -> str:
    """Return a reason in plain words: what is short, or what to fix, naming the claim when it is said."""
    one = nodes == 1
    where = f"{nodes} node{'' if one else 's'} " if nodes else ""
    if reason == CANNOT_ALLOCATE:
        want = f"{gpus} free GPU{'' if gpus == 1 else 's'}" if gpus else "the devices its claims ask"
        return f"{where}{'lacks' if one else 'lack'} {want} (DRA: cannot allocate all claims)"
    if reason == NOT_ON_NODE:
        return f"{where}{'is' if one else 'are'} not where its claim's devices are allocated (DRA)"
    if reason == IN_USE:
        return "its ResourceClaim is reserved by other pods (DRA)"
    if reason == ALLOCATING:
        return "its ResourceClaim is being allocated (DRA)"
    return f"configuration problem (DRA, {reason}): {text.strip()}"
