"""Kueue's ClusterQueues as the teams' entitlement: nominal quota, borrowing limit and usage in GPUs, the
cohort each lends and borrows in, and the LocalQueues (namespaces, teams) that lead into it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from watchtower.domain.forms.kueue.tables import KueueTables


class KueueSource(Protocol):
    """What `kueue_queue_lines` reads of the cluster state: a Protocol, not `ClusterState`, since the state
    imports the forms' registry and the Kueue form presents these lines."""

    @property
    def kueue(self) -> KueueTables: ...

    def team_of(self, namespace: str) -> str: ...


@dataclass(frozen=True, slots=True)
class KueueQueueLine:
    name: str
    cohort: str
    nominal_gpus: int | None
    borrowing_limit_gpus: int | None
    lending_limit_gpus: int | None
    reserved_gpus: int
    used_gpus: int
    borrowed_gpus: int
    pending: int
    admitted: int
    stopped: bool
    local_queues: tuple[tuple[str, str], ...]  # (namespace, name)
    namespaces: tuple[str, ...]
    teams: tuple[str, ...]


def kueue_queue_lines(state: KueueSource) -> tuple[KueueQueueLine, ...]:
    """Return every ClusterQueue the state holds, by name, with the LocalQueues that point at it."""
    cqs = state.kueue.cluster_queues
    if not cqs:
        return ()
    lqs: dict[str, list[tuple[str, str]]] = {}
    for (ns, name), lq in state.kueue.local_queues.items():
        lqs.setdefault(lq.cluster_queue, []).append((ns, name))
    out = []
    for name in sorted(cqs):
        q = cqs[name]
        local = tuple(sorted(lqs.get(name, ())))
        namespaces = tuple(sorted({ns for ns, _ in local}))
        out.append(
            KueueQueueLine(
                name=q.name,
                cohort=q.cohort,
                nominal_gpus=q.nominal_gpus,
                borrowing_limit_gpus=q.borrowing_limit_gpus,
                lending_limit_gpus=q.lending_limit_gpus,
                reserved_gpus=q.reserved_gpus,
                used_gpus=q.used_gpus,
                borrowed_gpus=q.borrowed_gpus,
                pending=q.pending,
                admitted=q.admitted,
                stopped=q.stopped,
                local_queues=local,
                namespaces=namespaces,
                teams=tuple(sorted({state.team_of(ns) for ns in namespaces})),
            )
        )
    return tuple(out)
