"""The cluster as Watchtower sees it, kept up to date object by object.

Every change goes through `ClusterState`, which keeps the indexes an evaluation needs (waiting pods,
GPUs held per node, pods per workload) so that a tick never walks all pods. Applying the same object
twice changes nothing and reports nothing twice: replays after a re-list are harmless (DESIGN §3.12).
It holds its parts, each a field: the change log its evaluators read (`log`, change_log.py), the
controllers, quotas and their refusals (`control`, state_controllers.py), the preemption ledger
(`ledger`, preemption_ledger.py) and each queue form's part (`forms`, forms/parts.py), built from the
forms' registry (domain/forms/registry.py): a form's part applies that form's objects to its tables, so
a new form adds its part and no line here. `bindings()` says how each watched kind reaches it, for the
Ingestor.

Size: longer than most modules because the pod index is one piece (each pod change moves the waiting,
GPU, per-node and per-workload indexes together, and what happened with them), which a further split
would only thread through more calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from operator import attrgetter
from typing import Any

from msgspec.structs import replace as with_fields

from watchtower.domain.forms import registry
from watchtower.domain.forms.dra.records import PodClaim, UnresolvedClaim
from watchtower.domain.forms.dra.tables import DraTables
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.gangs.tables import GangTables
from watchtower.domain.forms.kueue.dra import workload_of_user
from watchtower.domain.forms.kueue.records import KueueWorkload
from watchtower.domain.forms.kueue.tables import KueueTables
from watchtower.domain.forms.parts import FormParts
from watchtower.domain.forms.quota.refusals import quota_refusal
from watchtower.domain.records import Event, Namespace, Node, Pod, PriorityClass

from . import kinds
from .binding import Binding
from .change_log import ChangeLog
from .disruptions import (
    Disruption,
    Preemption,
    disruption_from_pod,
    preemption_from_event,
    preemption_from_pod,
    started_at,
)
from .never import NodeInventory
from .node_use import NodeUse
from .operator_events import operator_warning
from .preemption_ledger import PreemptionLedger, PreemptionSeen
from .state_controllers import ControllerPart
from .workloads import WorkloadKey, workload_of

__all__ = [
    "ClusterState",
    "DisruptionSeen",
    "Happening",
    "PodScheduled",
    "PodStarted",
    "PreemptionSeen",
]


@dataclass(frozen=True, slots=True)
class PodScheduled:
    """A pod left the queue: bound at `at` after waiting `wait` seconds since creation."""

    pod: Pod
    at: float
    wait: float


@dataclass(frozen=True, slots=True)
class PodStarted:
    """A bound pod's first container started, `latency` seconds after binding (image pulls)."""

    pod: Pod
    latency: float


@dataclass(frozen=True, slots=True)
class DisruptionSeen:
    disruption: Disruption


Happening = PodScheduled | PodStarted | PreemptionSeen | DisruptionSeen


@dataclass(slots=True)
class ClusterState:
    """The pods and the rest; the change log, the controllers, the preemption ledger and the forms' parts are
    parts it holds."""

    pods: dict[str, Pod] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    namespaces: dict[str, Namespace] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    # Pod groups (upstream, Volcano), upstream Workloads, Volcano queues.
    gangs: GangTables = field(default_factory=GangTables)
    # DRA: device classes, claims, templates, slices; the GPU classes come from `gpu.device_classes`.
    dra: DraTables = field(default_factory=DraTables)
    # Kueue Workloads (keyed by their job), ClusterQueues, LocalQueues, WorkloadPriorityClasses.
    kueue: KueueTables = field(default_factory=KueueTables)
    # indexes
    waiting: set[str] = field(default_factory=set)
    gpus_used: dict[str, int] = field(default_factory=dict)
    # The same GPUs by namespace: the fairness gauges' "used" per team, without walking the pods each tick.
    gpus_used_by_namespace: dict[str, int] = field(default_factory=dict)
    node_use: NodeUse = field(default_factory=NodeUse)  # CPU, memory, pod slots per node
    by_workload: dict[WorkloadKey, set[str]] = field(default_factory=dict)
    workload_of_uid: dict[str, WorkloadKey] = field(default_factory=dict)
    # Waiting pods per workload, so that a tick finds the waiting workloads without walking the pods.
    waiting_workloads: dict[WorkloadKey, int] = field(default_factory=dict)
    # The forms to build parts for; None: every registered form (registry.FORMS, read when the state is made).
    queue_forms: InitVar[tuple[QueueForm, ...] | None] = None
    # Bumped when a node is added, removed or changed: what can never start is worked out again then.
    nodes_generation: int = 0
    _inventory: tuple[int, Mapping[str, int], NodeInventory] | None = field(
        default=None, init=False, repr=False
    )
    # Workloads touched since a reader last read: what an evaluator re-derives.
    log: ChangeLog = field(default_factory=ChangeLog)
    # Pod controllers, ResourceQuotas, their refusals and operator warnings.
    control: ControllerPart = field(init=False)
    # Preemptions (merged from pods, events, preemptors) and disruptions.
    ledger: PreemptionLedger = field(init=False)
    # Each queue form's part: how its objects change its tables (the tables above for gangs, DRA, Kueue).
    forms: FormParts = field(init=False)

    def __post_init__(self, queue_forms: tuple[QueueForm, ...] | None) -> None:
        self.control = ControllerPart(self.log, self._rekey)
        self.ledger = PreemptionLedger(self)
        self.forms = FormParts.built(self, registry.FORMS if queue_forms is None else queue_forms)

    def bindings(self) -> dict[str, Binding[Any]]:
        """Return how each watched kind reaches the state, by kind name: the pods' and the rest of the
        core's, the controllers' and quotas', and each form part's."""
        # The whole state's, not a part's: the Ingestor binds every kind here, whichever part holds it.
        name, uid = attrgetter("name"), attrgetter("uid")
        core: dict[str, Binding[Any]] = {
            kinds.NAMESPACE.name: Binding(
                self.upsert_namespace, lambda ns: self.delete_namespace(ns.name), self.namespaces, name
            ),
            kinds.PRIORITY_CLASS.name: Binding(
                self.upsert_priority_class,
                lambda pc: self.delete_priority_class(pc.name),
                self.priority_classes,
                name,
            ),
            kinds.NODE.name: Binding(self.upsert_node, lambda n: self.delete_node(n.name), self.nodes, name),
            # The DELETED object is the pod's last word: its conditions may show that it was preempted.
            kinds.POD.name: Binding(
                self.upsert_pod, lambda p: self.delete_pod(p.uid, p), self.pods, uid, paged=True
            ),
            # Events expire on their own and what they told stays told: deleting one changes nothing.
            kinds.EVENT.name: Binding(self.upsert_event, None, None, uid),
            **self.control.bindings(),
        }
        by_forms = self.forms.bindings()
        # A kind bound twice would reach one part only, silently: a new form's mistake, said at once.
        if twice := core.keys() & by_forms.keys():
            raise ValueError(f"kinds bound twice: {sorted(twice)}")
        return {**core, **by_forms}

    # ---- pods -------------------------------------------------------------------------------------

    def upsert_pod(self, pod: Pod) -> list[Happening]:
        """Record a pod's current object (ADDED or MODIFIED) and return what newly happened."""
        old = self.pods.get(pod.uid)
        if pod.claims or (old is not None and old.claims):
            pod = self._with_claims(old, pod)
        self.pods[pod.uid] = pod
        self._index(old, pod)
        out = self._happenings(old, pod)
        out.extend(self.ledger.preemptor_seen(pod))
        if self.ledger.outcomes.open:  # most of the time no preemptor is open: nothing to look at
            self.ledger.outcomes.pod_changed(old, pod)
        return out

    def delete_pod(self, uid: str, final: Pod | None = None) -> list[Happening]:
        """Forget a pod; `final` is the DELETED watch object, whose conditions may show a preemption."""
        old = self.pods.pop(uid, None)
        last = final if final is not None else old
        if old is not None and old.claims:
            self.dra.saw_pod(uid, old.namespace, old.claims, gone=True)
            if last is final and final is not None and final.claims:
                # The DELETED object's GPUs as the pod held them: its record may name them.
                last = with_fields(
                    final, gpus=final.gpus - final.dra_gpus + old.dra_gpus, dra_gpus=old.dra_gpus
                )
        self._index(old, None)
        if last is None:
            return []
        out = self._happenings(old, last, deleted=True)
        if uid in self.ledger.awaited_preemptors:
            out.extend(self.ledger.preemptor_seen(last))
        self.ledger.victim_gone(uid)
        if uid in self.ledger.outcomes.open:
            self.ledger.outcomes.pod_gone(uid, last)
        return out

    def _with_claims(self, old: Pod | None, pod: Pod) -> Pod:
        """Return the pod with the GPUs its ResourceClaims ask added to `gpus`, and index its claims."""
        if old is not None and old.claims and old.claims != pod.claims:
            self.dra.saw_pod(old.uid, old.namespace, old.claims, gone=True)
        if pod.claims and (old is None or old.claims != pod.claims):
            self.dra.saw_pod(pod.uid, pod.namespace, pod.claims)
        dra = self.dra.pod_gpus(pod.namespace, pod.claims)
        if dra == pod.dra_gpus:
            return pod
        return with_fields(pod, gpus=pod.gpus - pod.dra_gpus + dra, dra_gpus=dra)

    def reread(self, uids: set[str]) -> None:
        """Re-count the GPUs of pods (and Kueue Workloads) whose claim, template, class or slice changed."""
        for uid in sorted(uids):
            pod = self.pods.get(uid)
            if pod is not None:
                self.upsert_pod(pod)
                continue
            nn = workload_of_user(uid)
            w = self.kueue.workloads.get(nn) if nn is not None else None
            if w is not None:
                self.forms.kueue.upsert_workload(w)

    def _index(self, old: Pod | None, new: Pod | None) -> None:
        uid = new.uid if new is not None else old.uid if old is not None else ""
        wkey = self.workload_of_uid.get(uid)
        if wkey is None and new is not None:
            wkey = workload_of(new)
            if wkey.kind == "JobSet":  # a TrainJob's, when its JobSet is held (DESIGN §3.17)
                wkey = self.control.workload_of_controller(wkey)
        if wkey is not None:
            self.log.touch(wkey)
            if old is not None and old.waiting:
                left = self.waiting_workloads.get(wkey, 0) - 1
                if left > 0:
                    self.waiting_workloads[wkey] = left
                else:
                    self.waiting_workloads.pop(wkey, None)
            if new is not None and new.waiting:
                self.waiting_workloads[wkey] = self.waiting_workloads.get(wkey, 0) + 1
        self.node_use.apply(old, new)
        if old is not None:
            if old.holds_resources and old.gpus:
                left = self.gpus_used.get(old.node, 0) - old.gpus
                if left > 0:
                    self.gpus_used[old.node] = left
                else:
                    self.gpus_used.pop(old.node, None)
                left = self.gpus_used_by_namespace.get(old.namespace, 0) - old.gpus
                if left > 0:
                    self.gpus_used_by_namespace[old.namespace] = left
                else:
                    self.gpus_used_by_namespace.pop(old.namespace, None)
            self.waiting.discard(old.uid)
            if new is None:
                key = self.workload_of_uid.pop(old.uid, None)
                if key is not None:
                    members = self.by_workload.get(key)
                    if members is not None:
                        members.discard(old.uid)
                        if not members:
                            del self.by_workload[key]
        if new is not None:
            if new.holds_resources and new.gpus:
                self.gpus_used[new.node] = self.gpus_used.get(new.node, 0) + new.gpus
                ns = new.namespace
                self.gpus_used_by_namespace[ns] = self.gpus_used_by_namespace.get(ns, 0) + new.gpus
            if new.waiting:
                self.waiting.add(new.uid)
            if new.uid not in self.workload_of_uid and wkey is not None:
                self.workload_of_uid[new.uid] = wkey
                self.by_workload.setdefault(wkey, set()).add(new.uid)
                if new.group is not None:
                    self.gangs.saw_pod(new.group, new.namespace, wkey)

    def _happenings(self, old: Pod | None, new: Pod, *, deleted: bool = False) -> list[Happening]:
        out: list[Happening] = []
        if not deleted and old is not None:
            # Only transitions seen happen: a pod first seen already bound (the initial LIST after a
            # restart) was scheduled before we watched, and counting it again at every start-up would
            # put a burst of old waits into the time-to-schedule histograms.
            at = new.scheduled_at
            if at is not None and old.scheduled_at is None:
                out.append(PodScheduled(new, at, max(0.0, at - new.created)))
            if at is not None and new.running_since is not None and old.running_since is None:
                out.append(PodStarted(new, max(0.0, new.running_since - at)))
        p = preemption_from_pod(new)
        if p is not None:
            out.extend(self.ledger.record(p))
        elif new.uid not in self.ledger.disruptions:
            d = disruption_from_pod(new)
            if d is not None:
                self.ledger.disruptions[d.uid] = d
                out.append(DisruptionSeen(d))
        return out

    # ---- events -----------------------------------------------------------------------------------

    def upsert_event(self, ev: Event) -> list[Happening]:
        """Take what an event adds: the preemptor of a victim, a quota refusal or an operator's warning."""
        p = preemption_from_event(ev)
        if p is not None:
            pod = self.pods.get(p.victim_uid)
            if pod is not None and pod.disruption is None:
                # The event came first: complete it from the pod we still have.
                from_pod = Preemption(
                    victim_uid=pod.uid,
                    victim_namespace=pod.namespace,
                    victim_name=pod.name,
                    node=pod.node,
                    victim_workload=workload_of(pod),
                    victim_priority=pod.priority,
                    victim_priority_class=pod.priority_class,
                    victim_gpus=pod.gpus,
                    victim_started=started_at(pod),
                )
                p = p.merged(from_pod)
            return list(self.ledger.record(p))
        q = quota_refusal(ev)
        if q is not None:
            self.control.refuse(q)
            return []
        warned = operator_warning(ev)
        if warned is not None:
            self.control.warn(*warned)
        return []

    # ---- the other kinds ---------------------------------------------------------------------------

    def upsert_node(self, node: Node) -> None:
        if self.nodes.get(node.name) != node:
            self.nodes_generation += 1
        self.nodes[node.name] = node

    def delete_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.nodes_generation += 1

    def inventory(self) -> NodeInventory:
        """Return the schedulable nodes' inventory (never.py), made again only when a node or the GPUs
        ResourceSlices publish changed."""
        dra_gpus = self.dra.node_gpus()  # a new dict when the slices change, often with the same GPUs
        inv = self._inventory
        if (
            inv is not None
            and inv[0] == self.nodes_generation
            and inv[1] is not dra_gpus
            and inv[1] == dra_gpus
        ):
            inv = self._inventory = (inv[0], dra_gpus, inv[2])
        if inv is None or inv[0] != self.nodes_generation or inv[1] is not dra_gpus:
            inv = self._inventory = (
                self.nodes_generation,
                dra_gpus,
                NodeInventory(self.nodes.values(), dra_gpus),
            )
        return inv[2]

    def upsert_namespace(self, ns: Namespace) -> None:
        old = self.namespaces.get(ns.name)
        self.namespaces[ns.name] = ns
        if old is None or old.team != ns.team:
            self._touch_namespace(ns.name)

    def delete_namespace(self, name: str) -> None:
        if self.namespaces.pop(name, None) is not None:
            self._touch_namespace(name)

    def _touch_namespace(self, namespace: str) -> None:
        """Touch the workloads of one namespace: its team is all a namespace gives them. A touch of all of
        them made every reader of the log start over, at 150,000 pods a full re-derivation each time a team
        made a namespace; a walk of the keys costs a few milliseconds."""
        keys = {k for k in self.by_workload if k.namespace == namespace}
        keys.update(k for k in self.waiting_workloads if k.namespace == namespace)
        keys.update(k for k in self.control.quota_refusals if k.namespace == namespace)
        keys.update(k for k in self.control.operator_warnings if k.namespace == namespace)
        for held in self.forms.pod_less:
            keys.update(k for k in held.held(self) if k.namespace == namespace)
        for k in sorted(keys):
            self.log.touch(k)

    def upsert_priority_class(self, pc: PriorityClass) -> None:
        if self.priority_classes.get(pc.name) != pc:
            self.priority_classes[pc.name] = pc
            self.log.touch_all()

    def delete_priority_class(self, name: str) -> None:
        if self.priority_classes.pop(name, None) is not None:
            self.log.touch_all()

    def _rekey(self, old: WorkloadKey, new: WorkloadKey) -> None:
        """Re-key the pods and Kueue Workloads indexed under `old` (a JobSet's, before the JobSet named its
        TrainJob) to `new`."""
        if old in self.kueue.by_key:
            self._touch_each(self.kueue.rekey(old, new))
        members = self.by_workload.pop(old, None)
        if not members:
            return
        self.by_workload.setdefault(new, set()).update(members)
        for uid in members:
            self.workload_of_uid[uid] = new
        waiting = self.waiting_workloads.pop(old, 0)
        if waiting:
            self.waiting_workloads[new] = self.waiting_workloads.get(new, 0) + waiting
        self.log.touch(old)

    def _touch_each(self, keys: list[WorkloadKey]) -> None:
        for key in keys:
            self.log.touch(key)

    # ---- Kueue -------------------------------------------------------------------------------------

    def kueue_priority(self, w: KueueWorkload) -> tuple[int, str]:
        """Return a Kueue Workload's (priority, class): its own (spec.priority, its WorkloadPriorityClass or
        PriorityClass), else its pod template's as admission would give its pods."""
        pclass = w.priority_class or w.template_class
        prio = self.kueue.priority_of(w)
        if prio is not None:
            return prio, pclass
        pc = self.priority_classes.get(pclass) if pclass else None
        if pc is not None and w.priority_class_kind != "WorkloadPriorityClass":
            return pc.value, pc.name
        if w.template_priority is not None:
            return w.template_priority, pclass
        if not pclass:
            for pc in self.priority_classes.values():
                if pc.global_default:
                    return pc.value, pc.name
        return 0, pclass

    # ---- queries ----------------------------------------------------------------------------------

    def unresolved_claims(self) -> list[UnresolvedClaim]:
        """Return the pods, not yet bound nor finished, that name a claim, template or class not there."""
        pods = self.pods

        def claims_of(uid: str) -> tuple[PodClaim, ...]:
            p = pods.get(uid)
            return p.claims if p is not None else ()

        out = []
        for uid, (reason, why) in self.dra.unresolved(claims_of).items():
            p = pods.get(uid)
            if p is None or p.node or p.terminal or p.deleted_at is not None:
                continue
            owner = p.owner
            out.append(
                UnresolvedClaim(
                    p.namespace,
                    p.name,
                    uid,
                    owner.kind if owner is not None else "",
                    owner.name if owner is not None else "",
                    reason,
                    why,
                    p.created,
                )
            )
        out.sort(key=lambda u: (u.created, u.namespace, u.pod))
        return out

    def node_gpus(self, node: Node) -> int:
        """Return a node's GPUs: its `nvidia.com/gpu` allocatable and the GPUs its ResourceSlices publish."""
        return node.gpus + self.dra.node_gpus().get(node.name, 0)

    def team_of(self, namespace: str) -> str:
        ns = self.namespaces.get(namespace)
        return ns.team if ns is not None and ns.team else namespace

    def prune(self, *, now: float, keep_seconds: float) -> None:
        """Forget preemptions, disruptions and quota refusals older than the horizon."""
        # The whole state's: one horizon for the ledger and the controllers part alike.
        horizon = now - keep_seconds
        self.ledger.prune(horizon, now)
        self.control.prune_refusals(horizon, now)
