"""The routing tree: which receivers an alert goes to and how it is grouped there (Alertmanager's Route)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .matchers import Matcher, all_match

GROUP_BY_ALL = "..."


@dataclass(frozen=True, slots=True)
class Route:
    """A node of the tree, with inherited settings already filled in. `path` names it: "0", "0.1", ..."""

    path: str
    receiver: str
    matchers: tuple[Matcher, ...]
    group_by: tuple[str, ...]
    group_wait: float
    group_interval: float
    repeat_interval: float
    continue_: bool = False
    routes: tuple[Route, ...] = ()

    def match(self, labels: Mapping[str, str]) -> list[Route]:
        """Return the routes an alert lands on: the deepest matching nodes, siblings only with `continue`."""
        if not all_match(self.matchers, labels):
            return []
        found: list[Route] = []
        for child in self.routes:
            hits = child.match(labels)
            found.extend(hits)
            if hits and not child.continue_:
                break
        return found or [self]

    def group_labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        if GROUP_BY_ALL in self.group_by:
            return dict(labels)
        return {k: labels[k] for k in self.group_by if k in labels}

    def group_key(self, labels: Mapping[str, str]) -> str:
        """Return Alertmanager's group key: the route, then the grouping labels sorted."""
        gl = self.group_labels(labels)
        inner = ",".join(f"{k}={gl[k]!r}" for k in sorted(gl))
        return f"{{{self.path}}}:{{{inner}}}"

    def walk(self) -> list[Route]:
        out = [self]
        for c in self.routes:
            out.extend(c.walk())
        return out
