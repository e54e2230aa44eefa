"""The gangs form's part of the state: upstream Workloads and PodGroups, Volcano's PodGroups and Queues.

Applies their objects to the gang tables (tables.py) and touches the workloads whose facts they
change; a PodGroup first seen completes the preemption records that waited for it as their preemptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

from watchtower.domain import kinds
from watchtower.domain.binding import Binding
from watchtower.domain.change_log import ChangeLog
from watchtower.domain.forms.gangs.records import Gang, GangWorkload, VolcanoQueue
from watchtower.domain.forms.gangs.tables import GangTables
from watchtower.domain.preemption_ledger import PreemptionLedger
from watchtower.domain.workloads import WorkloadKey

_ns_name = attrgetter("namespace", "name")


class GangHost(Protocol):
    @property
    def gangs(self) -> GangTables: ...
    @property
    def ledger(self) -> PreemptionLedger: ...
    @property
    def log(self) -> ChangeLog: ...


@dataclass(slots=True)
class GangForm:
    host: GangHost

    def _touch_each(self, keys: list[WorkloadKey]) -> None:
        for key in keys:
            self.host.log.touch(key)

    def upsert_pod_group(self, g: Gang) -> None:
        self._touch_each(self.host.gangs.upsert_pod_group(g))
        self.host.ledger.group_seen(g)

    def delete_pod_group(self, g: Gang) -> None:
        self._touch_each(self.host.gangs.delete_pod_group(g))

    def upsert_volcano_group(self, g: Gang) -> None:
        self._touch_each(self.host.gangs.upsert_volcano_group(g))

    def delete_volcano_group(self, g: Gang) -> None:
        self._touch_each(self.host.gangs.delete_volcano_group(g))

    def upsert_workload(self, w: GangWorkload) -> None:
        self._touch_each(self.host.gangs.upsert_workload(w))

    def delete_workload(self, w: GangWorkload) -> None:
        self._touch_each(self.host.gangs.delete_workload(w))

    def upsert_queue(self, q: VolcanoQueue) -> None:
        self.host.gangs.upsert_queue(q)

    def delete_queue(self, q: VolcanoQueue) -> None:
        self.host.gangs.delete_queue(q.name)

    def bindings(self) -> dict[str, Binding[Any]]:
        """Return the bindings of this form's kinds, by kind name."""
        t = self.host.gangs
        return {
            kinds.WORKLOAD.name: Binding(self.upsert_workload, self.delete_workload, t.workloads, _ns_name),
            kinds.POD_GROUP.name: Binding(
                self.upsert_pod_group, self.delete_pod_group, t.pod_groups, _ns_name
            ),
            kinds.VOLCANO_POD_GROUP.name: Binding(
                self.upsert_volcano_group, self.delete_volcano_group, t.volcano_groups, _ns_name
            ),
            kinds.VOLCANO_QUEUE.name: Binding(
                self.upsert_queue, self.delete_queue, t.queues, attrgetter("name")
            ),
        }
