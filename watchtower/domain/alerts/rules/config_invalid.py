"""WatchtowerConfigInvalid: the configuration file changed to one that cannot be used, so Watchtower goes on
with the one it runs."""

from __future__ import annotations

from ..model import AlertCandidate
from .base import RuleInput, links

NAME = "WatchtowerConfigInvalid"
SHOWN = 20  # problems listed in the annotation; a file broken everywhere is not worth a megabyte of alert


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    problems = inp.config_problems
    if not problems:
        return []
    listed = "\n".join(f"- {p}" for p in problems[:SHOWN])
    more = f"\n- ... and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    return [
        AlertCandidate(
            {"alertname": NAME, "severity": "warning", "namespace": "", "team": "watchtower"},
            {
                "summary": f"The new configuration has {len(problems)} problem{'s' if len(problems) != 1 else ''};"
                " Watchtower goes on with the one it runs",
                "description": (
                    "The configuration file changed and was not applied: fix the problems below (each by its"
                    f" YAML path); the running configuration stays until a valid one arrives.\n{listed}{more}"
                ),
                **links(inp.settings, NAME, None),
            },
        )
    ]
