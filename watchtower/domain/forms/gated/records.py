"""Scheduling gates: who owns a gate, and what a workload's gated pods carry into its facts.

Upstream names (read from their sources):
- Kueue's plain-pod integration (sigs.k8s.io/kueue pkg/controller/jobs/pod/constants): every managed pod is
  created with the gate `kueue.x-k8s.io/admission`, and with `kueue.x-k8s.io/topology` where topology-aware
  scheduling places it; a pod group is named by the label `kueue.x-k8s.io/pod-group-name` and counted by the
  annotation `kueue.x-k8s.io/pod-group-total-count`. Kueue makes one Workload for the group, named after the
  group and owned by each pod without a controller reference, so it is keyed as its own (`KueueWorkload`).
- Volcano 1.15 (volcano-sh/volcano docs/design/scheduling-gates-queue-admission.md): pods that opt in carry
  the gate `scheduling.volcano.sh/queue-allocation-gate` until their queue has room.
- The API server writes `PodScheduled=False` reason `SchedulingGated` on a pod with any gate.
"""

from __future__ import annotations

import msgspec

KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
KUEUE_TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
KUEUE_GATES = frozenset({KUEUE_ADMISSION_GATE, KUEUE_TOPOLOGY_GATE})
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
VOLCANO_QUEUE_GATE = "scheduling.volcano.sh/queue-allocation-gate"

# Who holds a gated workload: GatedFacts.owner, the JSON's `gated.owner` and the gauge's `gate_owner` label.
OWNER_KUEUE = "kueue"
OWNER_VOLCANO = "volcano"
OWNER_OTHER = "other"


def gate_owner(gates: tuple[str, ...]) -> str:
    """Return the system that holds a pod behind these gates: a known system's gate wins over others'."""
    if any(g in KUEUE_GATES for g in gates):
        return OWNER_KUEUE
    if VOLCANO_QUEUE_GATE in gates:
        return OWNER_VOLCANO
    return OWNER_OTHER


class GatedFacts(msgspec.Struct, frozen=True, gc=False):
    """What the gated form adds to a workload (`WorkloadFacts.form_facts["gated"]`): its pods' gates."""

    owner: str  # OWNER_KUEUE, OWNER_VOLCANO or OWNER_OTHER
    gates: tuple[str, ...]  # the gates its gated pods carry, sorted ("" when a pod's gates had no name read)
    since: float  # the earliest creation of its gated pods: how long the gates have held it
    expected: bool  # every gate is one `queue.expected_gates` names: listed, not alerted
