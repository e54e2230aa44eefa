"""What a queue form's simulated controller does, as the points of a tick the core calls it at; and finding
each form's controller by the forms' registry (watchtower/domain/forms/registry.py).

A form the simulator produces is a package `simulator/forms/<name>/` (named as the form) whose `controller`
module has `controller(store, created) -> FormController`; a registered form without one is simply not
simulated. The core (cluster.py, controllers.py, lifecycle.py, binding.py) calls every form's hooks in the
registry's order and holds no form's controller: adding one edits none of it.

When they run: at the start `linked` (every form's controller made), `add_nodes`, `furnish`, `standing`;
on a submission `submitted`, `build` and `shape` (its controller object), `created`; each tick `gone` (a
workload over), `admits`, `pod` and `refuses` (each pod a controller makes), `reconcile`, `session` (after
kube-scheduler's cycle) with `bound` for each pod bound, `pods_changed`, `settle`; `objects` for a LIST;
`room` when asked.

What the core still knows of particular forms, as kube-scheduler and the API server do: a pod's DRA
claims (pod_json.py, the scheduler's DynamicResources filter in scheduler.py and binding.py), the upstream
gang's all-or-nothing placing (binding.py, kube-scheduler's GangScheduling plugin), the controller kinds
(pods.py CONTROLLER) and the submission's fields for each form (workloads.py WorkloadSpec).

What the core knows of scheduling gates, as the API server and kube-scheduler do: a form's `pod` hook may
give a pod gates (`PodDraft.gates`, only at creation: the API server refuses gates added later); the pod is
created with `PodScheduled=False` reason `SchedulingGated` (pod_json.py renders `spec.schedulingGates`);
kube-scheduler (binding.py) and Volcano's stand-in skip a pod while it has any gate; `Store.ungate`, an
update of the pod, removes gates, and the next cycle schedules it. Who removes which gate is the forms'.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from watchtower.domain.forms.registry import FORMS

if TYPE_CHECKING:
    from watchtower.simulator.events import EventLog
    from watchtower.simulator.pods import SimPod, SimWorkload
    from watchtower.simulator.scheduler import Scheduler
    from watchtower.simulator.store import Store
    from watchtower.simulator.workloads import PodTemplate

FORMS_PACKAGE = "watchtower.simulator.forms"


class Binder(Protocol):
    """What a form's scheduler decides through: kube-scheduler's binding and refusals (binding.py), in the
    form's own words (`scheduler`: its schedulerName)."""

    def bind(self, p: SimPod, node: str, t: float, *, scheduler: str = "") -> None: ...

    def unschedulable(self, p: SimPod, message: str, t: float, *, scheduler: str = "") -> None: ...


@dataclass(slots=True)
class PodDraft:
    """A pod its controller is about to make, as the core named, labelled and owned it: what the forms amend
    (a gang's name and group, a child Job's labels and owner, another scheduler) before quota admission."""

    name: str
    index: int  # of its template in the workload's
    labels: dict[str, str]
    owner: dict[str, Any] | None
    group: str = ""  # the PodGroup it names in spec.schedulingGroup.podGroupName
    scheduler: str = ""  # spec.schedulerName when not kube-scheduler's
    annotations: dict[str, str] | None = None
    # spec.schedulingGates a webhook adds: the API server takes gates only at a pod's creation
    gates: tuple[str, ...] = ()


class FormController:
    """A form's simulated controller: every hook does nothing unless the form acts there.

    `kinds` are the kinds whose objects `objects` serves to a LIST (the cluster asks no other form for them)."""

    kinds: frozenset[str] = frozenset()

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Return the form's objects of `kind`, as the API server lists them."""
        return []

    def linked(self, forms: Sequence[FormController]) -> None:
        """Meet the other forms' controllers, once all are made: a form that acts on another's objects (the
        gated form ungating what Kueue admitted) keeps the one it needs."""

    def add_nodes(self, store: Store, created: float) -> None:
        """Add the nodes the form brings to `store.nodes` (after the cluster's own)."""

    def furnish(self, store: Store) -> None:
        """Add what the cluster starts with once its namespaces exist (before a prelude adds its own)."""

    def standing(self) -> Iterable[dict[str, Any]]:
        """Return the objects that exist before anyone listens: they get resourceVersions at the start."""
        return ()

    def build(self, w: SimWorkload) -> dict[str, Any] | None:
        """Return the controller object of a new workload of a kind the form owns; None when not its kind.
        (controllers.py `pod_template` and `templates_by_role` make its pod templates.)"""
        return None

    def shape(self, w: SimWorkload, body: dict[str, Any]) -> None:
        """Amend a new workload's controller object before it is written (a policy, a suspension...)."""

    def submitted(self, store: Store, w: SimWorkload) -> None:
        """Act on a submission before its controller object is written (what its user applies beside it)."""

    def created(self, store: Store, w: SimWorkload, body: dict[str, Any] | None) -> None:
        """Write what the form makes for a new workload, after its controller object `body` (None: a bare pod)."""

    def pod(self, store: Store, w: SimWorkload, tpl: PodTemplate, draft: PodDraft) -> None:
        """Amend a pod the workload's controller is about to make (before quota admits or refuses it)."""

    def refuses(
        self, store: Store, log: EventLog, w: SimWorkload, tpl: PodTemplate, name: str, t: float
    ) -> bool:
        """Return whether the form's admission refuses the pod `name` (and write the refusal)."""
        return False

    def room(self, store: Store, namespace: str) -> int:
        """Return the GPUs the form still admits in `namespace` (a large number when it does not limit it)."""
        return 10**9

    def admits(self, w: SimWorkload) -> bool:
        """Return whether the workload's controller may make its pods now."""
        return True

    def reconcile(self, store: Store, t: float) -> None:
        """Act once a tick, after the controllers made their pods and before kube-scheduler's cycle."""

    def session(
        self, store: Store, log: EventLog, binder: Binder, ledger: Callable[[], Scheduler], t: float
    ) -> None:
        """Schedule the form's own pods after kube-scheduler's cycle, on the ledger it left (`ledger()`)."""

    def bound(self, store: Store, p: SimPod, t: float) -> None:
        """Act on a pod just bound to its node (before its binding is written)."""

    def pods_changed(self, store: Store, t: float, changed: set[str]) -> None:
        """Write the status of the workloads (by uid) whose pods changed this tick."""

    def settle(self, store: Store, t: float) -> None:
        """Act at the end of a tick, after every status write (what counts the tick's pods)."""

    def gone(self, store: Store, w: SimWorkload) -> None:
        """Delete what the form made for a workload that is over (the garbage collector's part)."""


def controller_module(name: str) -> Any | None:
    """Return the simulated controller module of the form `name`, or None when the simulator has none."""
    module = f"{FORMS_PACKAGE}.{name}.controller"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name in (module, f"{FORMS_PACKAGE}.{name}"):
            return None
        raise


def form_controllers(store: Store, created: float) -> tuple[FormController, ...]:
    """Return the controller of each registered form the simulator produces, in the registry's order."""
    out: list[FormController] = []
    for form in FORMS:
        module = controller_module(form.name)
        if module is not None:
            made = module.controller(store, created)
            if not isinstance(made, FormController):
                raise TypeError(
                    f"simulator/forms/{form.name}/controller.py made {made!r}, not a FormController"
                )
            out.append(made)
    return tuple(out)
