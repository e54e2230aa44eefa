"""The dispatcher's timing and grouping, as Alertmanager's: the first notification of a group after
`group_wait`, then at most one every `group_interval`, an unchanged one again after `repeat_interval`."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import (
    GROUP_INTERVAL,
    GROUP_WAIT,
    HOUR,
    REPEAT_INTERVAL,
    T0,
    alert_labels,
    route,
    tracked,
)
from watchtower.domain.alerts.dispatch import Dispatcher
from watchtower.domain.alerts.model import AlertState
from watchtower.domain.alerts.notify import NotifyEntry, needs_update
from watchtower.domain.alerts.routing import GROUP_BY_ALL


def workloads_in(flush):
    return sorted(a.labels["workload"] for a in flush.alerts)


def test_a_new_group_is_flushed_first_after_group_wait_not_before():
    d = Dispatcher(route())
    d.ingest([tracked(alert_labels("train"))], now=T0)
    assert d.next_due() == T0 + GROUP_WAIT
    assert d.due(now=T0 + GROUP_WAIT - 1) == []
    (f,) = d.due(now=T0 + GROUP_WAIT)
    assert workloads_in(f) == ["train"]
    assert f.labels == {"alertname": "WorkloadWaitWarning"}


def test_after_its_first_flush_a_group_is_flushed_every_group_interval():
    d = Dispatcher(route())
    d.ingest([tracked(alert_labels("train"))], now=T0)
    first = T0 + GROUP_WAIT
    assert len(d.due(now=first)) == 1
    assert d.due(now=first + GROUP_INTERVAL - 1) == []
    assert len(d.due(now=first + GROUP_INTERVAL)) == 1
    assert d.next_due() == first + 2 * GROUP_INTERVAL


def test_an_alert_joining_a_flushed_group_waits_for_its_next_interval_not_a_new_group_wait():
    d = Dispatcher(route())
    d.ingest([tracked(alert_labels("train"))], now=T0)
    d.due(now=T0 + GROUP_WAIT)
    d.ingest([tracked(alert_labels("eval"), at=T0 + 60)], now=T0 + 60)
    assert d.due(now=T0 + 60 + GROUP_WAIT) == []
    (f,) = d.due(now=T0 + GROUP_WAIT + GROUP_INTERVAL)
    assert workloads_in(f) == ["eval", "train"]


def test_alerts_sharing_the_group_by_labels_are_one_flush_the_others_their_own():
    d = Dispatcher(route(group_by=("alertname", "team")))
    d.ingest(
        [
            tracked(alert_labels("train", team="vision-team")),
            tracked(alert_labels("eval", team="vision-team")),
            tracked(alert_labels("bert", ns="nlp", team="nlp-team")),
        ],
        now=T0,
    )
    flushes = d.due(now=T0 + GROUP_WAIT)
    by_team = {f.labels["team"]: workloads_in(f) for f in flushes}
    assert by_team == {"vision-team": ["eval", "train"], "nlp-team": ["bert"]}


def test_grouping_by_all_labels_gives_each_alert_its_own_group():
    d = Dispatcher(route(group_by=(GROUP_BY_ALL,)))
    d.ingest([tracked(alert_labels("train")), tracked(alert_labels("eval"))], now=T0)
    flushes = d.due(now=T0 + GROUP_WAIT)
    assert sorted(workloads_in(f)[0] for f in flushes) == ["eval", "train"]
    assert all(len(f.alerts) == 1 for f in flushes)


def test_an_alert_routed_with_continue_is_grouped_at_each_receiver():
    root = route(
        "default",
        routes=(
            route("pager", path="0.0", matchers=['severity="critical"'], continue_=True),
            route("team", path="0.1", matchers=['team="vision-team"']),
        ),
    )
    d = Dispatcher(root)
    d.ingest([tracked(alert_labels("train", alertname="WorkloadWaitCritical", severity="critical"))], now=T0)
    assert sorted(f.route.receiver for f in d.due(now=T0 + GROUP_WAIT)) == ["pager", "team"]


def test_pending_alerts_are_sent_nowhere_and_a_resolved_one_no_group_held_is_dropped():
    d = Dispatcher(route())
    d.ingest(
        [
            tracked(alert_labels("train"), state=AlertState.PENDING),
            tracked(alert_labels("eval"), state=AlertState.RESOLVED),
        ],
        now=T0,
    )
    assert d.groups == {}
    assert d.next_due() is None


def test_a_resolved_alert_is_flushed_once_then_dropped_with_its_empty_group():
    d = Dispatcher(route())
    labels = alert_labels("train")
    d.ingest([tracked(labels)], now=T0)
    d.flushed(d.due(now=T0 + GROUP_WAIT)[0])
    d.ingest([tracked(labels, state=AlertState.RESOLVED, at=T0 + 100)], now=T0 + 100)
    (f,) = d.due(now=T0 + GROUP_WAIT + GROUP_INTERVAL)
    assert [a.state for a in f.alerts] == [AlertState.RESOLVED]
    d.flushed(f)
    assert d.groups == {}
    assert d.next_due() is None


def test_an_alert_that_fires_again_before_its_resolved_flush_is_handed_on_stays():
    d = Dispatcher(route())
    labels = alert_labels("train")
    d.ingest([tracked(labels)], now=T0)
    d.flushed(d.due(now=T0 + GROUP_WAIT)[0])
    d.ingest([tracked(labels, state=AlertState.RESOLVED, at=T0 + 100)], now=T0 + 100)
    f = d.due(now=T0 + GROUP_WAIT + GROUP_INTERVAL)[0]
    d.ingest([tracked(labels, at=T0 + 340)], now=T0 + 340)  # a new episode, while the flush is sent
    d.flushed(f)
    (g,) = d.groups.values()
    assert [a.state for a in g.alerts.values()] == [AlertState.FIRING]


def notifications(d, until, *, arrivals=()):
    """Run the dispatcher and the dedup stage every 10 s up to `until`; return when a notification went out
    and with which workloads firing. `arrivals`: (time, labels) of alerts that start firing then."""
    log = None
    sent = []
    pending = sorted(arrivals, key=lambda x: x[0])
    now = T0
    while now <= until:
        while pending and pending[0][0] <= now:
            at, labels = pending.pop(0)
            d.ingest([tracked(labels, at=at)], now=now)
        for f in d.due(now=now):
            firing = frozenset(a.fingerprint for a in f.alerts if a.state is AlertState.FIRING)
            if needs_update(log, firing, frozenset(), now=now, repeat_interval=f.route.repeat_interval):
                log = NotifyEntry(firing, frozenset(), now)
                sent.append((now - T0, workloads_in(f)))
            d.flushed(f)
        now += 10
    return sent


def test_an_unchanged_firing_group_is_notified_again_only_after_repeat_interval():
    d = Dispatcher(route())
    sent = notifications(d, T0 + 2 * HOUR, arrivals=[(T0, alert_labels("train"))])
    # Flushes come every group_interval; the first at or after repeat_interval repeats the notification.
    assert sent == [(GROUP_WAIT, ["train"]), (GROUP_WAIT + REPEAT_INTERVAL, ["train"])]


def test_a_new_alert_in_the_group_is_notified_at_the_next_flush_without_waiting_for_repeat():
    d = Dispatcher(route())
    sent = notifications(
        d, T0 + 20 * 60, arrivals=[(T0, alert_labels("train")), (T0 + 400, alert_labels("eval"))]
    )
    assert sent == [(GROUP_WAIT, ["train"]), (GROUP_WAIT + 2 * GROUP_INTERVAL, ["eval", "train"])]
