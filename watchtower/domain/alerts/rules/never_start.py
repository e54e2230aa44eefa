"""WorkloadCanNeverStart: work that cannot start as the cluster is configured, however long it waits.

Fired at once (no `for`, no threshold of its tier): waiting longer will not help, something must change
(the work's request, a node, a quota, a ClusterQueue). It resolves when that changes: a bigger node
listed, a quota raised, the work edited or gone.
"""

from __future__ import annotations

from ..model import AlertCandidate
from .base import RuleInput, links, workload_labels

NAME = "WorkloadCanNeverStart"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    """Return a warning per waiting workload that can never start as configured."""
    out = []
    for w in inp.snapshot.workloads:
        never = w.never
        if never is None or not w.waiting:
            continue
        labels = workload_labels(w, NAME, "warning")
        labels["reason"] = never.reason  # what must change: a node, a quota, a ClusterQueue
        out.append(
            AlertCandidate(
                labels,
                {
                    "summary": f"{w.kind} {w.namespace}/{w.name} {never.text}",
                    "description": (
                        f"{w.kind} {w.namespace}/{w.name} (tier {w.tier}) {never.text} (said by "
                        f"{never.source}). Waiting longer will not help: its request or the cluster's "
                        "configuration must change."
                    ),
                    "asks": never.asks,
                    "limit": never.limit,
                    "source": never.source,
                    **links(inp.settings, NAME, w.key),
                },
            )
        )
    return out
