"""The preemption ledger: who was preempted, by whom, and the disruptions that were not preemptions.

A part `ClusterState` holds. A record may be completed from three streams that arrive in any order (the
victim pod's conditions, the scheduler's event, the preemptor pod or PodGroup): the ledger merges them
and attributes the preemptor's priority once, when the record first names it, so that every reader (API,
page, metrics, alerts) has it after the preemptor is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from watchtower.domain.forms.gangs.records import REF_PODGROUP, Gang
from watchtower.domain.forms.gangs.tables import GangTables
from watchtower.domain.records import Pod, PriorityClass

from .change_log import ChangeLog
from .disruptions import Disruption, Preemption
from .preemption_outcome import OutcomeBook, Skip
from .state_controllers import ControllerPart


@dataclass(frozen=True, slots=True)
class PreemptionSeen:
    preemption: Preemption
    new: bool  # False when this only completed a record seen before


class LedgerHost(Protocol):
    """What the ledger reads of the state that holds it."""

    @property
    def pods(self) -> Mapping[str, Pod]: ...
    @property
    def priority_classes(self) -> Mapping[str, PriorityClass]: ...
    @property
    def gangs(self) -> GangTables: ...
    @property
    def log(self) -> ChangeLog: ...
    @property
    def control(self) -> ControllerPart: ...


@dataclass(slots=True)
class PreemptionLedger:
    host: LedgerHost
    preemptions: dict[str, Preemption] = field(default_factory=dict)  # by victim uid
    disruptions: dict[str, Disruption] = field(default_factory=dict)  # by uid
    # Preemptor uids named by a record before their pod (or PodGroup) was seen (the watches of events and
    # pods are separate streams) → the victims whose record waits for that preemptor's priority.
    awaited_preemptors: dict[str, set[str]] = field(default_factory=dict)
    # PodGroup uid → the victims of its gang-wide preemption still here (terminating). While any is, the
    # gang's preemption is under way: 1.36 workload-aware preemption nominates no node that would say so.
    group_victims: dict[str, set[str]] = field(default_factory=dict)
    # Whether each preemptor pod started where its victims were (stamped on the records by `settle`).
    outcomes: OutcomeBook = field(default_factory=OutcomeBook)

    def record(self, p: Preemption) -> list[PreemptionSeen]:
        """Take a preemption (new, or completing one seen before); return it when that changed anything."""
        vw = p.victim_workload
        if vw is not None and vw.kind == "JobSet":  # the victim's workload as its pods are keyed
            p = replace(p, victim_workload=self.host.control.workload_of_controller(vw))
        known = self.preemptions.get(p.victim_uid)
        rec = self.attributed(p if known is None else known.merged(p))
        if rec.preemptor_kind == "PodGroup" and rec.preemptor_uid and rec.victim_uid in self.host.pods:
            victims = self.group_victims.setdefault(rec.preemptor_uid, set())
            if rec.victim_uid not in victims:
                victims.add(rec.victim_uid)
                self._touch_group(rec)
        if known is None:
            self.preemptions[p.victim_uid] = rec
            self._judge(rec)
            return [PreemptionSeen(rec, new=True)]
        if rec != known:
            self.preemptions[p.victim_uid] = rec
            self._judge(rec)
            return [PreemptionSeen(rec, new=False)]
        return []

    def _judge(self, rec: Preemption) -> None:
        if rec.outcome is not None:
            return
        named = "/".join(x for x in (rec.preemptor_namespace, rec.preemptor_name) if x)
        self.outcomes.track(
            rec.victim_uid,
            preemptor_uid=rec.preemptor_uid,
            preemptor_ref=named,
            node=rec.node,
            at=rec.at,
            # Only kube-scheduler's pod preemptors were nominated a node (a 1.36 gang's names "cluster").
            judged=rec.preemptor_kind == "",
            pods=self.host.pods,
        )

    def settle(self, now: float, window: float) -> tuple[list[Preemption], list[Skip]]:
        """Resolve the preemptions whose window passed; stamp every outcome reached since the last call on
        its victims' records and return those records (each once) and the records skipped."""
        self.outcomes.expire(now, window, self.host.pods)
        resolved, skipped = self.outcomes.take()
        book = self.outcomes
        touched: dict[str, None] = {}
        for r in resolved:
            book.judged_victims.setdefault(r.preemptor_uid, set()).update(r.victims)
            touched[r.preemptor_uid] = None
        out: list[Preemption] = []
        # A victim named after its preemptor was decided (a re-list reads the bound preemptor before the
        # events) joins the outcome: the totals are the preemptor's victims' as known now, on every record.
        for uid in touched:
            victims = sorted(book.judged_victims[uid])
            recs = [p for v in victims if (p := self.preemptions.get(v)) is not None]
            lost = sum(p.gpu_hours_lost or 0.0 for p in recs)
            outcome = book.resolved[uid] = replace(book.resolved[uid], victims=len(recs), gpu_hours_lost=lost)
            for p in recs:
                if p.outcome != outcome:
                    stamped = self.preemptions[p.victim_uid] = p.with_outcome(outcome)
                    if p.outcome is None:  # counted once, when first decided
                        out.append(stamped)
        return out, skipped

    def attributed(self, p: Preemption) -> Preemption:
        """Return the record with its preemptor's priority and class, read once from the preemptor pod."""
        if p.preemptor_priority is not None:
            return p
        if p.preemptor_kind == "PodGroup":
            return self._attributed_to_group(p)
        pods = self.host.pods
        pod: Pod | None = None
        if p.preemptor_uid:
            pod = pods.get(p.preemptor_uid)
            if pod is None:
                self.awaited_preemptors.setdefault(p.preemptor_uid, set()).add(p.victim_uid)
        elif p.preemptor_namespace and p.preemptor_name:
            # Older schedulers name the preemptor, not its uid: rare enough that a walk is acceptable.
            ns, name = p.preemptor_namespace, p.preemptor_name
            pod = next((x for x in pods.values() if x.name == name and x.namespace == ns), None)
        return p if pod is None else p.attributed_to(pod)

    def _preempting_group(self, p: Preemption) -> Gang | None:
        groups = self.host.gangs.pod_groups
        g = groups.get((p.preemptor_namespace, p.preemptor_name))
        if g is None or (p.preemptor_uid and g.uid != p.preemptor_uid):
            # The event's `related` names it; without that, the uid alone (few groups: a walk will do).
            g = next((x for x in groups.values() if x.uid == p.preemptor_uid), None)
        return g

    def _attributed_to_group(self, p: Preemption) -> Preemption:
        """Return the record with the preempting PodGroup's identity and priority, when the group is held."""
        g = self._preempting_group(p) if p.preemptor_uid else None
        pc = self.host.priority_classes.get(g.priority_class) if g is not None else None
        priority = g.priority if g is not None and g.priority is not None else pc.value if pc else None
        if g is None or priority is None:
            if p.preemptor_uid:
                self.awaited_preemptors.setdefault(p.preemptor_uid, set()).add(p.victim_uid)
            return p
        return replace(
            p,
            preemptor_namespace=g.namespace,
            preemptor_name=g.name,
            preemptor_priority=priority,
            preemptor_priority_class=g.priority_class,
        )

    def _touch_group(self, rec: Preemption) -> None:
        g = self._preempting_group(rec)
        if g is not None:
            for key in self.host.gangs.naming(REF_PODGROUP, g.namespace, g.name):
                self.host.log.touch(key)

    def preemptor_seen(self, pod: Pod) -> list[PreemptionSeen]:
        """Attribute the records that waited for this pod as their preemptor."""
        if not self.awaited_preemptors:
            return []
        out: list[PreemptionSeen] = []
        for victim in sorted(self.awaited_preemptors.pop(pod.uid, ())):
            rec = self.preemptions.get(victim)
            if rec is not None and rec.preemptor_priority is None:
                rec = rec.attributed_to(pod)
                self.preemptions[victim] = rec
                out.append(PreemptionSeen(rec, new=False))
        return out

    def group_seen(self, g: Gang) -> None:
        """Attribute the records that waited for this PodGroup as their preemptor."""
        for victim in sorted(self.awaited_preemptors.pop(g.uid, ())) if g.uid else ():
            rec = self.preemptions.get(victim)
            if rec is not None and rec.preemptor_priority is None:
                self.preemptions[victim] = self.attributed(rec)

    def victim_gone(self, uid: str) -> None:
        """A victim of a gang-wide preemption left: the gang's preemption may be over."""
        rec = self.preemptions.get(uid)
        if rec is not None and rec.preemptor_kind == "PodGroup":
            victims = self.group_victims.get(rec.preemptor_uid)
            if victims is not None and uid in victims:
                victims.discard(uid)
                if not victims:
                    del self.group_victims[rec.preemptor_uid]
                self._touch_group(rec)

    def prune(self, horizon: float, now: float) -> None:
        """Forget preemptions and disruptions older than the horizon, and what waited on them."""
        for uid in [u for u, p in self.preemptions.items() if (p.at or now) < horizon]:
            del self.preemptions[uid]
        for uid, victims in list(self.awaited_preemptors.items()):
            victims.intersection_update(self.preemptions)
            if not victims:
                del self.awaited_preemptors[uid]
        for uid, victims in list(self.group_victims.items()):
            victims.intersection_update(self.preemptions)
            if not victims:
                del self.group_victims[uid]
        for uid in [u for u, d in self.disruptions.items() if (d.at or now) < horizon]:
            del self.disruptions[uid]
        named = {p.preemptor_uid for p in self.preemptions.values()}
        self.outcomes.prune(named | self.preemptions.keys())
