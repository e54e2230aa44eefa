"""Silences: matchers and a time window; while active, a silence mutes every alert it matches."""

from __future__ import annotations

import pytest

from tests.unit.domain.alerts.builders import HOUR, T0, alert_labels
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.silences import SilenceError, SilenceState, expire, new_silence, silenced_by


def silence(*matchers, id="s1", starts_at=T0, ends_at=T0 + HOUR, now=T0):
    return new_silence(
        id=id,
        matchers=[Matcher.parse(m) for m in matchers],
        starts_at=starts_at,
        ends_at=ends_at,
        created_by="alice",
        comment="maintenance of gpu-3",
        now=now,
    )


def test_a_silence_mutes_the_alerts_its_matchers_all_match_and_no_other():
    s = silence('namespace="vision"', 'workload=~"train|eval"')
    assert s.mutes(alert_labels("train"), T0)
    assert s.mutes(alert_labels("eval"), T0)
    assert not s.mutes(alert_labels("bert"), T0)  # one matcher is not enough
    assert not s.mutes(alert_labels("train", ns="nlp"), T0)
    assert not silence('workload=~"tra"').mutes(alert_labels("train"), T0)  # regexes are anchored


def test_a_negative_matcher_silences_everything_but_what_it_names():
    s = silence('team="vision-team"', 'severity!="critical"')
    assert s.mutes(alert_labels("train", severity="warning"), T0)
    assert not s.mutes(alert_labels("train", alertname="WorkloadWaitCritical", severity="critical"), T0)


def test_a_silence_mutes_from_its_start_until_just_before_its_end():
    s = silence('workload="train"', starts_at=T0 + 600, ends_at=T0 + 1200, now=T0)
    labels = alert_labels("train")
    assert s.state(T0 + 599) is SilenceState.PENDING and not s.mutes(labels, T0 + 599)
    assert s.state(T0 + 600) is SilenceState.ACTIVE and s.mutes(labels, T0 + 600)
    assert s.mutes(labels, T0 + 1199)
    assert s.state(T0 + 1200) is SilenceState.EXPIRED and not s.mutes(labels, T0 + 1200)


def test_expiring_an_active_silence_ends_it_now():
    s = expire(silence('workload="train"'), T0 + 300)
    assert (s.ends_at, s.updated_at) == (T0 + 300, T0 + 300)
    assert not s.mutes(alert_labels("train"), T0 + 300)


def test_an_expired_pending_silence_never_starts_and_expiring_again_changes_nothing():
    s = expire(silence('workload="train"', starts_at=T0 + HOUR, ends_at=T0 + 2 * HOUR), T0 + 60)
    assert s.state(T0 + 60) is SilenceState.EXPIRED
    assert s.state(T0 + 1.5 * HOUR) is SilenceState.EXPIRED
    assert expire(s, T0 + 120) is s


def test_silenced_by_lists_the_active_silences_that_mute_the_alert():
    sil = [
        silence('workload="train"', id="a"),
        silence('team="vision-team"', id="b"),
        silence('workload="eval"', id="c"),
        silence('workload="train"', id="d", starts_at=T0 + HOUR, ends_at=T0 + 2 * HOUR),
    ]
    assert silenced_by(alert_labels("train"), sil, T0) == ["a", "b"]
    assert silenced_by(alert_labels("train"), sil, T0 + HOUR) == ["d"]


@pytest.mark.parametrize(
    ("matchers", "window", "who", "why", "complaint"),
    [
        ((), (T0, T0 + HOUR), "alice", "x", "at least one matcher"),
        (('team=~".*"',), (T0, T0 + HOUR), "alice", "x", "match every alert"),
        (('team!="nobody"',), (T0, T0 + HOUR), "alice", "x", "match every alert"),
        (('team="vision"',), (T0 + HOUR, T0), "alice", "x", "ends before it starts"),
        (('team="vision"',), (T0 - 2 * HOUR, T0 - HOUR), "alice", "x", "already be expired"),
        (('team="vision"',), (T0, T0 + HOUR), " ", "x", "created_by"),
        (('team="vision"',), (T0, T0 + HOUR), "alice", "", "comment"),
    ],
)
def test_a_silence_that_would_mute_nothing_or_everything_by_mistake_is_refused(
    matchers, window, who, why, complaint
):
    with pytest.raises(SilenceError, match=complaint):
        new_silence(
            id="s",
            matchers=[Matcher.parse(m) for m in matchers],
            starts_at=window[0],
            ends_at=window[1],
            created_by=who,
            comment=why,
            now=T0,
        )
