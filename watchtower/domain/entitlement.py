"""Volcano Queues as the teams' entitlement: each Queue's GPUs and the namespaces whose work names it.

Where Volcano schedules, a team's share is its Queue, not a ResourceQuota: how many GPUs it may ever use
(capability), its fair share (deserved, lent out while unused), what is reserved for it (guarantee) and
what it holds now (allocated). Field meanings: volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go
(QueueSpec, QueueStatus) and volcano-sh/website content/en/docs/queue_resource_management.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from watchtower.domain.forms.gangs.tables import GangTables

from .state_controllers import ControllerPart


class EntitlementSource(Protocol):
    """What `queue_lines` reads of the cluster state: a Protocol, not `ClusterState`, since the state
    imports the forms' registry and the gangs form presents these lines."""

    @property
    def gangs(self) -> GangTables: ...

    @property
    def control(self) -> ControllerPart: ...

    def team_of(self, namespace: str) -> str: ...


@dataclass(frozen=True, slots=True)
class QueueLine:
    """One Volcano Queue as shown to people, with the namespaces (and their teams) that use it."""

    name: str
    weight: int
    state: str
    capability_gpus: int | None
    deserved_gpus: int | None
    guarantee_gpus: int | None
    allocated_gpus: int | None
    namespaces: tuple[str, ...]
    teams: tuple[str, ...]


def queue_lines(state: EntitlementSource) -> tuple[QueueLine, ...]:
    """Return every Volcano Queue the state holds, by name, each with the namespaces whose Volcano PodGroups
    or PaddleJobs (spec.schedulingPolicy.queue) name it."""
    queues = state.gangs.queues
    if not queues:
        return ()
    users: dict[str, set[str]] = {}
    for g in state.gangs.volcano_groups.values():
        if g.queue:
            users.setdefault(g.queue, set()).add(g.namespace)
    for c in state.control.controllers.get("PaddleJob", {}).values():
        if c.queue:
            users.setdefault(c.queue, set()).add(c.namespace)
    out = []
    for name in sorted(queues):
        q = queues[name]
        namespaces = tuple(sorted(users.get(name, ())))
        out.append(
            QueueLine(
                name=q.name,
                weight=q.weight,
                state=q.state,
                capability_gpus=q.capability_gpus,
                deserved_gpus=q.deserved_gpus,
                guarantee_gpus=q.guarantee_gpus,
                allocated_gpus=q.allocated_gpus,
                namespaces=namespaces,
                teams=tuple(sorted({state.team_of(ns) for ns in namespaces})),
            )
        )
    return tuple(out)
