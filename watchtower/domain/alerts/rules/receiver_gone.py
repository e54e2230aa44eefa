"""WatchtowerReceiverGone: a webhook answered 410 Gone, so Watchtower stopped sending to it."""

from __future__ import annotations

from ..model import AlertCandidate
from .base import RuleInput, links

NAME = "WatchtowerReceiverGone"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    return [
        AlertCandidate(
            {
                "alertname": NAME,
                "severity": "warning",
                "namespace": "",
                "team": "watchtower",
                "integration": name,
            },
            {
                "summary": f"Notifications to {name} are disabled: the endpoint answered 410 Gone",
                "description": (
                    f"{why}. Fix the receiver's configuration (a changed configuration is enabled again "
                    "at the next start), or enable it with POST /api/v1/receivers/<receiver>/enable."
                ),
                **links(inp.settings, NAME, None),
            },
        )
        for name, why in sorted(inp.gone_receivers.items())
    ]
