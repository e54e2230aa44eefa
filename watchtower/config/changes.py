"""What changed between two configurations, and which of the changes a running service can take.

Taken while running (applied by a reload): the alert rules' settings (`alerting.rules`), the routing
tree, receivers, inhibition rules, delivery retries (`alerting.delivery`, except its `mode`) and
`alerting.resolved_retention`. Everything else is read once at start: a change of it is reported as
needing a restart and runs with the old value until then. Tiers are among those: their thresholds are
part of each workload's queue facts, which the queue tracker works out with the policy it started with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .model import Settings

LIVE = (
    "alerting.rules",
    "alerting.route",
    "alerting.receivers",
    "alerting.inhibit_rules",
    "alerting.delivery",
    "alerting.resolved_retention",
)
NOT_LIVE_WITHIN = ("alerting.delivery.mode",)


@dataclass(frozen=True, slots=True)
class ConfigChanges:
    live: tuple[str, ...]  # YAML paths that changed and are applied while running
    restart: tuple[str, ...]  # YAML paths that changed and take effect at the next start

    def __bool__(self) -> bool:
        return bool(self.live or self.restart)


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        if not value:
            yield path, {}
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        yield f"{path}[]", len(value)  # a list that grew or shrank is a change even where items agree
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _changed(old: Settings, new: Settings) -> list[str]:
    # Python-mode dumps keep SecretStr values, which compare by their secret: a rotated secret is a change.
    a, b = dict(_leaves(old.model_dump(), "")), dict(_leaves(new.model_dump(), ""))
    return sorted(p for p in a.keys() | b.keys() if a.get(p, _MISSING) != b.get(p, _MISSING))


_MISSING = object()


def _within(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith((p + ".", p + "[")) for p in prefixes)


def config_changes(old: Settings, new: Settings) -> ConfigChanges:
    """Return the paths that differ between `old` and `new`, split into what a reload applies and what
    waits for a restart."""
    changed = _changed(old, new)
    live = tuple(p for p in changed if _within(p, LIVE) and not _within(p, NOT_LIVE_WITHIN))
    return ConfigChanges(live=live, restart=tuple(p for p in changed if p not in live))
