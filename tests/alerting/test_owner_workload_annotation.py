"""The owner named on the workload's own object: a PaddleJob as paddle-operator makes it and its pods
(tests/fixtures/real/paddlejob-with-pods.json, its pods turned back to waiting), with
`watchtower.dev/notify` on the PaddleJob and not (or otherwise) on its pods, through the real decoder, the
queue, the owner notices' service, the outbox and a real SMTP server (aiosmtpd), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.alerting.helpers import CLASSES, NO_FIT, T0, Clock
from tests.alerting.test_owner_notices import Lease, Replica, oncall, owner_settings, smtp, team_hook
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.kube.reading import parse_time
from watchtower.simulator import objects as o
from watchtower.simulator.objects.meta import owner_ref

__all__ = ["oncall", "smtp", "team_hook"]  # the fixtures, used by name

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "paddlejob-with-pods.json"
NOTIFY = "watchtower.dev/notify"


def waiting_paddle_job(
    namespace: str, *, job_notify: str | None, pod_notify: dict[int, str]
) -> tuple[list, float]:
    """The captured PaddleJob and its 4 worker pods, in `namespace`, before any pod was placed: the job
    Pending, each pod unschedulable. Annotations: `job_notify` on the PaddleJob, `pod_notify[i]` on pod i."""
    # Each copy its own uids, as three jobs would have.
    text = REAL.read_text()
    for uid in set(re.findall(r'"uid": "([0-9a-f-]{36})"', text)):
        text = text.replace(uid, f"{namespace}-{uid}"[:36])
    items = json.loads(text)["items"]
    job, pods = items[0], items[1:]
    job["metadata"]["namespace"] = namespace
    job["status"] = {"mode": "Collective", "phase": "Pending"}
    if job_notify is not None:
        job["metadata"]["annotations"] = {NOTIFY: job_notify}
    created = parse_time(pods[0]["metadata"]["creationTimestamp"])
    assert created is not None
    for i, p in enumerate(pods):
        p["metadata"]["namespace"] = namespace
        p["spec"].pop("nodeName", None)
        p["status"] = {"phase": "Pending", "conditions": [o.unschedulable(created + 1, NO_FIT)]}
        if i in pod_notify:
            p["metadata"].setdefault("annotations", {})[NOTIFY] = pod_notify[i]
    return items, created


async def test_the_paddlejobs_own_annotation_names_the_owner_over_its_pods_and_is_refused_when_hostile(
    store_backend, smtp, oncall, team_hook
):
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    # Named on the PaddleJob only; one pod names someone else: the job's owner is told, once.
    named, created = waiting_paddle_job(
        "team-p", job_notify="pj-owner@corp.example", pod_notify={2: "pod-owner@corp.example"}
    )
    # A hostile value on the job: refused (counted, logged) as a pod's would be; its pods' valid address
    # does not stand in for it, and team-q has no contact: no notice.
    hostile, _ = waiting_paddle_job(
        "team-q", job_notify="http://127.0.0.1:9/steal", pod_notify={0: "pod-owner@corp.example"}
    )
    # Named on its pods only: the pods' annotation, as before.
    pods_only, _ = waiting_paddle_job("team-r", job_notify=None, pod_notify={1: "pods-owner@corp.example"})
    lease, clock = Lease(), Clock()
    lease.give("a")
    a = Replica(s, store_backend, clock, lease, "a")
    at = created + 2 * 86400  # past every tier's threshold
    await a.tick([*named, *hostile, *pods_only], at)
    await a.tick([*named, *hostile, *pods_only], at + 30)
    got = sorted((tuple(m[1]), p["Subject"]) for m, p in zip(inbox.messages, inbox.parsed(), strict=True))
    assert [to for to, _ in got] == [("pj-owner@corp.example",), ("pods-owner@corp.example",)]
    assert "ctr" in got[0][1] and "tier's warning threshold" in got[0][1]
    assert a.refused("url") == 1
    await a.close()


def test_the_decoder_reads_a_controllers_annotation_only_for_owner_notices_and_cuts_it():
    items, _ = waiting_paddle_job("team-p", job_notify="x@corp.example," * 1000, pod_notify={})
    raw = json.dumps(items[0]).encode()
    assert ObjectDecoder().decode("PaddleJob", raw).notify == ""
    got = ObjectDecoder(read_notify=True).decode("PaddleJob", raw).notify
    assert 0 < len(got) <= 2048 and got.startswith("x@corp.example,")


async def test_a_deployments_annotation_copied_to_its_replicaset_names_the_owner(
    store_backend, smtp, oncall, team_hook
):
    """The Deployment controller copies the Deployment's annotations to its ReplicaSets; Watchtower holds
    the ReplicaSet (not the Deployment), so the owner is read there for the Deployment's workload."""
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    _, created = waiting_paddle_job("team-d", job_notify=None, pod_notify={})
    rs = o.replica_set(
        name="serve-7d9f",
        namespace="team-d",
        created=created,
        template={
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}
        },
        replicas=1,
        deployment="serve",
    )
    rs["metadata"]["annotations"][NOTIFY] = "dep-owner@corp.example"
    ref = owner_ref("ReplicaSet", "serve-7d9f", api_version="apps/v1", uid=rs["metadata"]["uid"])
    p = o.pod(
        name="serve-7d9f-abcde",
        namespace="team-d",
        created=created,
        gpus=2,
        owner=ref,
        conditions=[o.unschedulable(created + 1, NO_FIT)],
    )
    lease, clock = Lease(), Clock()
    lease.give("a")
    a = Replica(s, store_backend, clock, lease, "a")
    await a.tick([rs, p], created + 2 * 86400)
    assert [m[1] for m in inbox.messages] == [["dep-owner@corp.example"]]
    assert "serve" in inbox.parsed()[0]["Subject"]
    await a.close()


def preempted_job(namespace: str, name: str, *, notify: str, at: float) -> list[dict]:
    """A low-tier Job whose one pod kube-scheduler preempted at `at` (terminating, DisruptionTarget, the
    scheduler's Preempted event) for a critical pod of team-z: the Job is not waiting again."""
    prio, pclass = CLASSES["low"]
    created = at - 5000
    j = o.job(name=name, namespace=namespace, created=created, template={"spec": {}})
    j["metadata"]["annotations"] = {NOTIFY: notify}
    victim = o.pod(
        name=f"{name}-0",
        namespace=namespace,
        created=created,
        gpus=8,
        priority=prio,
        priority_class=pclass,
        owner=owner_ref("Job", name, api_version="batch/v1", uid=j["metadata"]["uid"]),
        node="n0",
        phase="Running",
        conditions=[
            o.scheduled(created + 10),
            o.condition(
                "DisruptionTarget",
                "True",
                at,
                reason="PreemptionByScheduler",
                message="Preempted by a pod on node n0",
            ),
        ],
        start_time=created + 11,
        deletion=at,
    )
    cprio, cclass = CLASSES["critical"]
    preemptor = o.pod(
        name=f"debug-for-{name}",
        namespace="team-z",
        created=at - 5,
        gpus=8,
        priority=cprio,
        priority_class=cclass,
        nominated_node="n0",
        conditions=[o.unschedulable(at - 4, NO_FIT)],
    )
    event = o.scheduler_event(
        namespace=namespace,
        reason="Preempted",
        note=f"Preempted by pod {preemptor['metadata']['uid']} on node n0",
        regarding=o.pod_ref(victim),
        related=o.pod_ref(preemptor),
        at=at,
    )
    return [j, victim, preemptor, event]


async def test_a_preempted_job_not_waiting_again_is_told_as_its_own_annotation_says(
    store_backend, smtp, oncall, team_hook
):
    """A victim's workload that is not waiting again has no queue facts: its annotation is read from its
    object (and remaining pods). team-f has a contact; one Job names its own owner, one opts out: neither
    may fall back to the team contact."""
    ctl, inbox = smtp
    s = owner_settings(ctl.port, oncall.url, team_hook.url)
    at = T0 + 86400
    objs = [
        *preempted_job("team-f", "named", notify="eva@corp.example", at=at),
        *preempted_job("team-f", "quiet", notify="off", at=at + 1),
    ]
    lease, clock = Lease(), Clock()
    lease.give("a")
    a = Replica(s, store_backend, clock, lease, "a")
    await a.tick(objs, at + 10)
    await a.tick(objs, at + 40)
    got = [(tuple(m[1]), p["Subject"]) for m, p in zip(inbox.messages, inbox.parsed(), strict=True)]
    assert got == [(("eva@corp.example",), "Job team-f/named was preempted")], got
    await a.close()
