"""The routing tree: which receivers an alert goes to and how it is grouped there (Alertmanager's Route)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import gotext
from .matchers import Matcher, MatchOp, all_match

GROUP_BY_ALL = "..."
ROOT_KEY = "{}"


def workload_grouping(group_by: Iterable[str]) -> tuple[str, ...]:
    """Return `group_by` as routed: `workload` brings `kind` beside it, unless named already.

    A workload is its namespace, kind and name: a Job and a JobSet of one name are two workloads, and
    grouping "per workload" by the name alone would put both in one notification."""
    out = tuple(group_by)
    if "workload" not in out or "kind" in out or GROUP_BY_ALL in out:
        return out
    i = out.index("workload") + 1
    return (*out[:i], "kind", *out[i:])


# pkg/labels MatchType order, the last sort key of Alertmanager's Matchers.
_OP_ORDER = {MatchOp.EQ: 0, MatchOp.NE: 1, MatchOp.RE: 2, MatchOp.NRE: 3}


def _matcher_text(m: Matcher) -> str:
    # pkg/labels Matcher.String: label names here never hold a reserved character, so only the value
    # is escaped, as OpenMetrics escapes it.
    value = m.value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return f'{m.name}{m.op.value}"{value}"'


def route_key(parent: str | None, matchers: tuple[Matcher, ...]) -> str:
    """Return Alertmanager's Route.Key(): the parent's key, `/`, then this route's matchers sorted (name,
    value, operator) as `{a="1",b=~"x"}`; the root's is `{}`."""
    ordered = sorted(matchers, key=lambda m: (m.name, m.value, _OP_ORDER[m.op]))
    own = "{" + ",".join(_matcher_text(m) for m in ordered) + "}"
    return own if parent is None else f"{parent}/{own}"


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
    key: str = ROOT_KEY  # Alertmanager's route key (`route_key`), as its group keys begin

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

    def alertmanager_group_key(self, group_labels: Mapping[str, str]) -> str:
        """Return the group key Alertmanager writes for these group labels on this route
        (dispatch.newAggrGroup): `{}/{tier="critical"}:{alertname="X", namespace="a"}`."""
        return f"{self.key}:{gotext.label_set(group_labels)}"

    def walk(self) -> list[Route]:
        out = [self]
        for c in self.routes:
            out.extend(c.walk())
        return out
