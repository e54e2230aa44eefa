"""Every `watchtower_*` series the shipped rules and dashboards read is one Watchtower exports: a renamed
metric cannot leave a panel or an alert reading nothing."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from watchtower.adapters.metrics.registry import WatchtowerMetrics
from watchtower.ports import QueueGauges

ROOT = Path(__file__).parents[2]
GENERATED = [
    *sorted((ROOT / "alerts" / "generated").glob("*.yaml")),
    *sorted((ROOT / "dashboards" / "generated").glob("*.json")),
]
# A series read by an expression; recording-rule names (level:metric:operations) are not exported series.
READ = re.compile(r"(?<![:\w])watchtower_\w+(?![:\w])")


def _exported() -> set[str]:
    m = WatchtowerMetrics(registry=CollectorRegistry())
    m.set_queue(QueueGauges(evaluated_at=1.0))
    names = set()
    for kind_line in re.findall(r"^# TYPE (\S+) (\S+)$", m.render().decode(), flags=re.MULTILINE):
        name, kind = kind_line
        names.add(name)
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def test_the_rules_and_dashboards_read_only_series_watchtower_exports():
    exported = _exported()
    read = {name for f in GENERATED for name in READ.findall(f.read_text(encoding="utf-8"))}
    assert {"watchtower_oldest_wait_seconds", "watchtower_preemptions_total"} <= read
    assert read - exported == set()
