"""The notices' words (nothing of other teams by name), the per-workload hour, the daily limit and the
digest, from real queue snapshots of object fixtures."""

from __future__ import annotations

import orjson

from tests.alerting.helpers import CLASSES, NO_FIT, T0, settings
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.disruptions import Preemption
from watchtower.domain.owners.notices import (
    Ledger,
    Limits,
    decide,
    digest_due,
    preempted_notice,
    record_send,
    started_notice,
    threshold_notice,
)
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.analyze import analyze
from watchtower.simulator import objects as o

S = settings({})
DEC = ObjectDecoder(read_notify=True)


def pod(name, tier, created, *, ns, gpus=8, notify=None):
    prio, pclass = CLASSES[tier]
    return o.pod(
        name=name,
        namespace=ns,
        created=created,
        gpus=gpus,
        priority=prio,
        priority_class=pclass,
        annotations={"watchtower.dev/notify": notify} if notify else None,
        conditions=[o.unschedulable(created + 1, NO_FIT)],
    )


def snap(objs, at):
    data = orjson.dumps(o.object_list([o.node(f"n{i}", gpus=8) for i in range(2)] + objs))
    return analyze(data, policy=S.queue_policy(), decoder=DEC, at=at).snapshot


def test_the_threshold_notice_counts_other_teams_work_ahead_and_never_names_it():
    at = T0 + 4 * 3600
    s = snap(
        [
            pod("secret-project-x", "high", T0, ns="other-team"),
            pod("secret-project-y", "high", T0 + 10, ns="other-team"),
            pod("mine", "low", T0, ns="team-a", gpus=16, notify="ana@corp.example"),
        ],
        at,
    )
    w = next(w for w in s.workloads if w.key.name == "mine")
    assert w.facts.notify == "ana@corp.example"
    n = threshold_notice(w, now=at, waits=None, capacity=s.capacity, quota=None)
    assert n is not None and n.kind == "threshold"
    text = n.subject + "\n".join(n.lines)
    assert "secret-project" not in text and "other-team" not in text
    assert "2 higher-tier workloads are ahead." in n.lines
    assert n.labels["team"] == "team-a" and n.labels["alertname"] == "OwnerNotice"


def test_no_threshold_notice_before_the_tier_warns():
    s = snap([pod("young", "low", T0, ns="team-a")], T0 + 60)
    assert threshold_notice(s.workloads[0], now=T0 + 60, waits=None, capacity=None, quota=None) is None


def test_a_pod_too_big_for_any_node_is_told_what_fits_now():
    from watchtower.domain.capacity import Capacity, NodeCapacity

    cap = Capacity(tuple(NodeCapacity(f"n{i}", allocatable=8, used=6, schedulable=True) for i in range(4)))
    at = T0 + 4 * 3600
    s = snap([pod("wide", "low", T0, ns="team-a", gpus=8)], at)
    n = threshold_notice(s.workloads[0], now=at, waits=None, capacity=cap, quota=None)
    assert any(
        "asks 8 GPUs on one node; the largest free block is 2; 4 pods of 2 GPUs would fit now" in x
        for x in n.lines
    )


def test_started_after_waiting_past_the_threshold_says_how_long():
    s = snap([pod("late", "low", T0, ns="team-a")], T0 + 3600)
    f = s.workloads[0].facts
    n = started_notice(f, now=f.since + 47 * 60 + f.warn_after)
    assert n is not None and "started after" in n.subject
    assert started_notice(f, now=f.since + 1) is None


def tier_of(priority: int, cls: str) -> str:
    return S.tier_policy().tier_of(priority, cls).name


def test_a_preemptor_of_another_namespace_is_named_only_by_its_tier():
    k = WorkloadKey("team-a", "Job", "train")
    p = Preemption(
        "uid-1",
        "team-a",
        "train-0",
        at=T0 + 7200,
        victim_workload=k,
        victim_gpus=8,
        victim_started=T0,
        preemptor_namespace="other",
        preemptor_name="their-secret-job",
        preemptor_priority=900_000,
        preemptor_priority_class="online-serving",
        victim_priority=100_000,
    )
    n = preempted_notice(p, team="team-a", now=T0 + 7200, waiting_again=True, tier_of=tier_of)
    text = "\n".join(n.lines)
    assert "their-secret-job" not in text and "other" not in text.replace("another", "")
    assert "high-tier work of another team" in text
    assert "GPU-hours lost: 16.0" in text and "It is waiting again." in text
    same = preempted_notice(
        Preemption(
            "uid-2",
            "team-a",
            "train-0",
            at=T0 + 7200,
            victim_workload=k,
            preemptor_namespace="team-a",
            preemptor_name="our-urgent",
        ),
        team="team-a",
        now=T0 + 7200,
        waiting_again=False,
        tier_of=tier_of,
    )
    assert "our-urgent of your namespace" in same.lines[0]


def notice_for(i: int, at: float):
    s = snap([pod(f"w{i}", "low", T0, ns="team-a")], at)
    return threshold_notice(s.workloads[0], now=at, waits=None, capacity=None, quota=None)


def test_one_message_per_workload_an_hour_then_ten_a_day_then_one_digest():
    lim = Limits()
    led = Ledger()
    at = T0 + 4 * 3600
    notices = [notice_for(i, at) for i in range(13)]
    out = []
    for n in notices:
        d = decide(led, n, at, lim)
        out.append(d)
        if d == "send":
            record_send(led, [n.workload], at)
        elif d == "digest":
            led.held.append(n)
    assert out == ["send"] * 10 + ["digest"] * 3
    assert decide(led, notices[0], at + 60, lim) == "wait"  # the same workload within the hour
    assert not digest_due(led, at + 3600, lim)  # the day is full
    assert digest_due(led, at + 86400, lim)  # a day later: the three go out as one digest
