"""The simulated controllers: the objects a workload is (Job, ReplicaSet, PaddleJob, JobSet and what they own),
the pods they create under ResourceQuota admission, and the status they write back.

Each function writes through the store (store.py), beside the form controllers it asks (hooks.py); the
shapes are in objects/ and the forms' objects modules (forms/<name>/), with their upstream sources. What a
form makes beside a workload's controller object is its controller's (`created`, `gone`); the kind
branches below (a PaddleJob's Volcano policy, a Kueue Job's suspension, a JobSet's and gang Job's pod
names, a DRA template's claims) are what is left of the forms here.
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

QUOTA_NAME = "gpu-quota"
GPU_KEY = "requests.nvidia.com/gpu"
MAX_BACKOFF = 300.0
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


def quota_used(store: Store, ns: str) -> int:
    """Return the GPUs a namespace's quota charges: every pod not in a terminal phase, terminating ones too."""
    return sum(p.gpus for p in store.pods.values() if p.namespace == ns and not p.terminal)


def quotas_used(store: Store) -> dict[str, int]:
    """Return quota_used of every namespace with a pod, in one pass over the pods (run every tick)."""
    out: dict[str, int] = {}
    for p in store.pods.values():
        if p.gpus and not p.terminal:
            out[p.namespace] = out.get(p.namespace, 0) + p.gpus
    return out


def reconcile(store: Store, log: EventLog, forms: Sequence[FormController], t: float) -> None:
    """Create the missing pods of each workload whose controller is due and every form admits, until quota
    refuses one."""
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
    quota = store.quotas.get(ns)
    if quota is not None and tpl.gpus > 0 and not spec.claim_template:
        hard = int(quota["status"]["hard"][GPU_KEY])
        used = quota_used(store, ns)
        if used + tpl.gpus > hard:
            _refused(store, log, w, tpl, name, used, hard, t)
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
    )
    store.pods[p.uid] = p
    w.slots[tpl.name] = p
    w.backoff = 10.0
    w.refused_since = None
    store.emit_pod(p, "ADDED")
    return True


def _refused(
    store: Store,
    log: EventLog,
    w: SimWorkload,
    tpl: PodTemplate,
    name: str,
    used: int,
    hard: int,
    t: float,
) -> None:
    store.stats["quota_refusals"] += 1
    if w.refused_since is None:
        w.refused_since = t
    w.next_create = t + w.backoff
    w.backoff = min(MAX_BACKOFF, w.backoff * 2)
    if w.spec.kind == "Pod":
        w.done = True  # `kubectl create` got the error; nothing retries a bare pod
        return
    reason = "FailedCreate"
    msg = (
        f'Error creating: pods "{w.spec.name}-" is forbidden: exceeded quota: {QUOTA_NAME}, '
        f"requested: {GPU_KEY}={tpl.gpus}, used: {GPU_KEY}={used}, limited: {GPU_KEY}={hard}"
    )
    if w.spec.kind == "PaddleJob":
        # paddle-operator records its own words, not the API's error (controllers/paddlejob_controller.go
        # createResource): the quota is read from the ResourceQuota itself.
        reason, msg = "Create", f"create failed Pod {name}"
    ev = w.failed_create
    if ev is not None and ev["message"] == msg and log.current(ev):
        ev["count"] += 1
        ev["lastTimestamp"] = obj.ts(t)
        log.emit(ev, "MODIFIED")
        return
    involved, component = w.ref, CONTROLLER[w.spec.kind][0]
    child = child_job(store, w, tpl)
    if child is not None:  # the child Job's controller is refused, on the child Job
        cm = child["metadata"]
        involved = {"kind": "Job", "namespace": cm["namespace"], "name": cm["name"], "uid": cm["uid"]}
        involved["apiVersion"], component = "batch/v1", "job-controller"
        msg = msg.replace(f'"{w.spec.name}-"', f'"{cm["name"]}-"')
    w.failed_create = log.new_core(
        involved, reason=reason, message=msg, type_="Warning", component=component, t=t
    )


def child_job(store: Store, w: SimWorkload, tpl: PodTemplate) -> dict[str, Any] | None:
    """Return the JobSet child Job a pod template belongs to; None for any other workload."""
    jobs = store.child_jobs.get(w.uid)
    if not jobs:
        return None
    job = tpl.name.rsplit("-", 1)[0]
    return next((j for j in jobs if j["metadata"]["name"] == job), None)
