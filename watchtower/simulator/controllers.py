"""The simulated controllers: the objects a workload is (a Job or ReplicaSet here, a form's kind by its form)
and the pods they create, as the forms amend and admit them.

Each function writes through the store (store.py), beside the form controllers it asks (hooks.py); the
shapes are in objects/ and the forms' objects modules (forms/<name>/), with their upstream sources. What a
form makes of a workload is its controller's (`build`, `shape`, `created`, `pod`, `refuses`, `gone`);
what is left of the forms here: pods named by their templates (a PaddleJob's, a bare pod's) and a DRA
template's claims in the pod template.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from watchtower.simulator import objects as obj
from watchtower.simulator.forms.dra import objects as dra_objects
from watchtower.simulator.hooks import PodDraft
from watchtower.simulator.pods import CONTROLLER, SimPod, SimWorkload
from watchtower.simulator.workloads import CLASS_BY_NAME, PodTemplate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from watchtower.simulator.events import EventLog
    from watchtower.simulator.hooks import FormController
    from watchtower.simulator.store import Store

GIVE_UP_AFTER = 2 * 3600.0  # people delete a job their quota has refused for this long


# ---- what a workload is, before any pod -----------------------------------------------------------


def created(store: Store, forms: Sequence[FormController], w: SimWorkload) -> None:
    """Write the objects a new workload is: its controller, then what the forms make before any pod."""
    spec = w.spec
    body: dict[str, Any] | None = None
    if spec.kind in CONTROLLER:
        body = controller_object(w, forms)
        store.controllers[w.uid] = (spec.kind, body)
        store.emit(spec.kind, body, "ADDED")
    for f in forms:
        f.created(store, w, body)


def controller_object(w: SimWorkload, forms: Sequence[FormController] = ()) -> dict[str, Any]:
    """Return the workload's controller as the API server serves it: its pod template per role.

    A form's kind (PaddleJob, JobSet) is the form's to build; every form then shapes what was built (a
    Volcano policy, a Kueue suspension)."""
    body = _build(w, forms)
    for f in forms:
        f.shape(w, body)
    return body


def pod_template(w: SimWorkload, t: PodTemplate) -> dict[str, Any]:
    """Return the pod template of a controller, as its controller object holds it."""
    spec = w.spec
    gpus = 0 if spec.claim_template else t.gpus
    body = obj.pod_template(
        gpus=gpus,
        cpu=t.cpu,
        memory=t.memory,
        priority_class=spec.priority_class,
        image=t.image,
        grace=spec.grace,
    )
    if spec.claim_template:
        dra_objects.claims_in_template(body, spec.claim_template)
    return body


def templates_by_role(w: SimWorkload) -> dict[str, tuple[int, dict[str, Any]]]:
    """Return each role's pod count and pod template, in the order the roles first come."""
    roles: dict[str, tuple[int, dict[str, Any]]] = {}
    for t in w.spec.pods:
        n, _ = roles.get(t.role, (0, {}))
        roles[t.role] = (n + 1, pod_template(w, t))
    return roles


def _build(w: SimWorkload, forms: Sequence[FormController]) -> dict[str, Any]:
    for f in forms:
        made = f.build(w)
        if made is not None:
            return made
    spec = w.spec
    name, ns, at, uid = spec.name, spec.namespace, w.created, w.uid
    first = spec.pods[0]
    n = len(spec.pods)
    if spec.kind == "Job":
        return obj.job(
            name=name,
            namespace=ns,
            created=at,
            uid=uid,
            template=pod_template(w, first),
            parallelism=n,
            completions=n,
        )
    # The simulator's ReplicaSets are a Deployment's: `<deployment>-<pod-template-hash>`.
    return obj.replica_set(
        name=name,
        namespace=ns,
        created=at,
        uid=uid,
        template=pod_template(w, first),
        replicas=n,
        deployment=name.rsplit("-", 1)[0],
    )


# ---- the pods, under quota admission --------------------------------------------------------------


def reconcile(store: Store, log: EventLog, forms: Sequence[FormController], t: float) -> None:
    """Create the missing pods of each workload whose controller is due and every form admits, until a form
    (quota) refuses one."""
    for w in store.workloads:
        if w.done or t < w.next_create:
            continue
        if w.refused_since is not None and t - w.refused_since > GIVE_UP_AFTER:
            _abandon(store, w, t)
            continue
        if not all(f.admits(w) for f in forms):
            continue
        for slot, live in w.slots.items():
            if live is not None:
                continue
            tpl = next(x for x in w.spec.pods if x.name == slot)
            if not _create_pod(store, log, forms, w, tpl, t):
                break


def _abandon(store: Store, w: SimWorkload, t: float) -> None:
    w.done = True
    w.deleted_at = t
    store.freed()
    for p in w.slots.values():
        if p is not None and not p.terminating:
            store.terminate(p, t, actual=store.rng.uniform(2.0, 10.0))


def _create_pod(
    store: Store, log: EventLog, forms: Sequence[FormController], w: SimWorkload, tpl: PodTemplate, t: float
) -> bool:
    spec = w.spec
    kind = spec.kind
    name = tpl.name if kind in ("PaddleJob", "Pod") else f"{spec.name}-{store.suffix()}"
    index = next(i for i, x in enumerate(spec.pods) if x.name == tpl.name)
    labels: dict[str, str] = {"app": spec.name, "team": spec.team}
    if kind == "Job":
        labels.update(
            {"batch.kubernetes.io/job-name": spec.name, "job-name": spec.name, "controller-uid": w.uid}
        )
    elif kind == "ReplicaSet":
        labels["pod-template-hash"] = spec.name.rsplit("-", 1)[-1]
    owner = None
    if kind in CONTROLLER:
        owner = obj.owner_ref(kind, spec.name, api_version=CONTROLLER[kind][1], uid=w.uid)
    draft = PodDraft(name, index, labels, owner)
    for f in forms:
        f.pod(store, w, tpl, draft)
    name, ns = draft.name, spec.namespace
    if any(f.refuses(store, log, w, tpl, name, t) for f in forms):
        return False
    pc = CLASS_BY_NAME[spec.priority_class]
    p = SimPod(
        uid=store.new_uid(f"pod/{ns}/{name}"),
        name=name,
        namespace=ns,
        created=t,
        template=tpl,
        workload=w,
        priority=pc.value,
        priority_class=pc.name,
        preemption_policy=pc.preemption_policy,
        labels=draft.labels,
        owner=draft.owner,
        grace=spec.grace,
        group=draft.group,
        scheduler=draft.scheduler,
        annotations=draft.annotations,
        gates=draft.gates,
    )
    if p.gates:  # written by the API server on a pod created with gates
        p.sched_cond = obj.scheduling_gated(t)
    store.pods[p.uid] = p
    w.slots[tpl.name] = p
    w.backoff = 10.0
    w.refused_since = None
    store.emit_pod(p, "ADDED")
    return True


def child_job(store: Store, w: SimWorkload, tpl: PodTemplate) -> dict[str, Any] | None:
    """Return the JobSet child Job a pod template belongs to; None for any other workload."""
    jobs = store.child_jobs.get(w.uid)
    if not jobs:
        return None
    job = tpl.name.rsplit("-", 1)[0]
    return next((j for j in jobs if j["metadata"]["name"] == job), None)
