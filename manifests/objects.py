"""Kubernetes object skeletons shared by the forms: metadata, ConfigMaps, and the labels a selector asks for."""

from __future__ import annotations

import re

from watchtower.config.artefacts import ArtefactsConfig
from watchtower.domain.alerts.matchers import Matcher, MatcherError, MatchOp

PART_OF = {"app.kubernetes.io/name": "watchtower", "app.kubernetes.io/part-of": "watchtower"}

_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*")\s*(,|$)')


def metadata(
    name: str,
    a: ArtefactsConfig,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, object]:
    out: dict[str, object] = {"name": name, "namespace": a.namespace, "labels": {**PART_OF, **(labels or {})}}
    if annotations:
        out["annotations"] = dict(annotations)
    return out


def config_map(
    name: str,
    data: dict[str, str],
    a: ArtefactsConfig,
    *,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(name, a, labels=labels, annotations=annotations),
        "data": dict(data),
    }


def selector_matchers(selector: str) -> list[Matcher]:
    """Return the matchers of a selector written inside braces (`job="x",instance=~"y"`); raise ValueError."""
    out: list[Matcher] = []
    pos = 0
    text = selector.strip()
    while pos < len(text):
        m = _MATCHER.match(text, pos)
        if m is None:
            raise ValueError(f'{selector!r} is not a list of matchers such as job="watchtower"')
        try:
            out.append(Matcher.parse(m.group(1)))
        except MatcherError as e:
            raise ValueError(f"{selector!r}: {e}") from None
        pos = m.end()
    return out


def fixed_labels(selector: str) -> dict[str, str]:
    """Return the label values a selector pins with `=`; raise ValueError for any other operator, since a
    scrape can only give its series fixed values."""
    out = {}
    for m in selector_matchers(selector):
        if m.op is not MatchOp.EQ:
            raise ValueError(
                f"{m}: the ServiceMonitor can give the series it scrapes fixed label values only; "
                'write artefacts.job_selector with = matchers (job="watchtower")'
            )
        out[m.name] = m.value
    return out
