"""WatchtowerPrometheusUnreachable: GPU utilisation cannot be read; its figures are stale, the
Kubernetes-based alerts are unaffected."""

from __future__ import annotations

from watchtower.domain.gpu_usage import UNREACHABLE_ALERT

from ..model import AlertCandidate
from .base import RuleInput, links

NAME = UNREACHABLE_ALERT


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    return [
        AlertCandidate(
            {**a.labels, "namespace": "", "team": "watchtower"},
            {**a.annotations, **links(inp.settings, NAME, None)},
        )
        for a in inp.gpu_alerts
        if a.name == NAME
    ]
