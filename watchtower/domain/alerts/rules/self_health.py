"""WatchtowerKubernetesUnreachable: Watchtower's own picture of the cluster is going stale."""

from __future__ import annotations

from ..model import AlertCandidate
from .base import RuleInput, human, links

NAME = "WatchtowerKubernetesUnreachable"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    h = inp.health
    if h is None or h.unhealthy_since is None:
        return []
    down = inp.now - h.unhealthy_since
    if down < inp.settings.unreachable_after:
        return []
    return [
        AlertCandidate(
            {"alertname": NAME, "severity": "critical", "namespace": "", "team": "watchtower"},
            {
                "summary": f"Watchtower has not had a healthy Kubernetes watch for {human(down)}",
                "description": (
                    f"The list/watch of the API server has failed for {human(down)}"
                    f"{': ' + h.detail if h.detail else ''}. Queue alerts are based on a stale picture "
                    "and may be missing or wrong until it recovers."
                ),
                **links(inp.settings, NAME, None),
            },
        )
    ]
