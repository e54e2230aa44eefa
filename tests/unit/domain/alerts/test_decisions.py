"""The pure alerting decisions: matchers, the dedup stage, routing with `continue`, lifecycle, backoff."""

from __future__ import annotations

import pytest

from watchtower.domain.alerts.backoff import next_delay
from watchtower.domain.alerts.lifecycle import LifecyclePolicy, advance
from watchtower.domain.alerts.matchers import Matcher, MatcherError
from watchtower.domain.alerts.model import AlertCandidate, AlertState, fingerprint
from watchtower.domain.alerts.notify import NotifyEntry, needs_update, notify_reason
from watchtower.domain.alerts.routing import Route


def test_matchers_anchor_regexes_and_treat_missing_labels_as_empty():
    assert Matcher.parse('tier=~"crit.*"').matches({"tier": "critical"})
    assert not Matcher.parse('tier=~"crit"').matches({"tier": "critical"})
    assert Matcher.parse('team!="a"').matches({})
    assert Matcher.parse("team!~a|b").matches({"team": "c"})
    with pytest.raises(MatcherError):
        Matcher.parse('x=~"("')


def test_fingerprint_ignores_label_order():
    assert fingerprint({"a": "1", "b": "2"}) == fingerprint({"b": "2", "a": "1"}) != fingerprint({"a": "1"})


def test_dedup_sends_new_firing_resolved_growth_and_repeats_only():
    e = NotifyEntry(frozenset({"a"}), frozenset(), at=100.0)
    kw = {"now": 200.0, "repeat_interval": 3600.0}
    assert needs_update(None, frozenset({"a"}), frozenset(), **kw)
    assert not needs_update(None, frozenset(), frozenset({"a"}), **kw)
    assert not needs_update(e, frozenset({"a"}), frozenset(), **kw)
    assert needs_update(e, frozenset({"a", "b"}), frozenset(), **kw)
    assert needs_update(e, frozenset(), frozenset({"a"}), **kw)
    assert needs_update(e, frozenset({"a"}), frozenset({"c"}), **kw)
    assert not needs_update(e, frozenset({"a"}), frozenset({"c"}), send_resolved=False, **kw)
    assert needs_update(e, frozenset({"a"}), frozenset(), now=3700.0, repeat_interval=3600.0)


def _r(path, receiver, matchers=(), cont=False, routes=()):
    return Route(
        path, receiver, tuple(Matcher.parse(m) for m in matchers), ("alertname",), 30, 300, 3600, cont, routes
    )


def test_routing_stops_at_the_first_match_unless_continue():
    root = _r(
        "0",
        "default",
        routes=(
            _r("0.0", "critical-pager", ['tier="critical"'], cont=True),
            _r("0.1", "team-vision", ['team="vision"']),
            _r("0.2", "never", ['team=~".*"']),
        ),
    )
    assert [r.receiver for r in root.match({"tier": "critical", "team": "vision"})] == [
        "critical-pager",
        "team-vision",
    ]
    assert [r.receiver for r in root.match({"tier": "low", "team": "nlp"})] == ["never"]
    assert (
        root.match({"tier": "critical", "team": "x"})[0].group_key({"alertname": "A"})
        == "{0.0}:{alertname='A'}"
    )


def test_lifecycle_pending_for_then_firing_then_resolved_after_keep_firing_for():
    c = AlertCandidate({"alertname": "A"})
    pol = LifecyclePolicy(pending_for=60, keep_firing_for=120)
    s, _ = advance({}, [c], now=0, policy=pol)
    assert s[c.fingerprint].state is AlertState.PENDING
    s, _ = advance(s, [c], now=60, policy=pol)
    assert s[c.fingerprint].state is AlertState.FIRING
    s, _ = advance(s, [], now=100, policy=pol)
    assert s[c.fingerprint].state is AlertState.FIRING
    s, ch = advance(s, [], now=180, policy=pol)
    assert s[c.fingerprint].state is AlertState.RESOLVED and ch[0].before is AlertState.FIRING
    s, _ = advance({}, [c], now=0, policy=pol)
    s, _ = advance(s, [], now=10, policy=pol)
    assert s == {}  # pending that stops never fired: nothing to resolve


def test_backoff_grows_is_capped_and_honours_retry_after():
    d = [next_delay(a, base=5, cap=600, jitter=0.0, rnd=0.5) for a in (1, 2, 3, 10)]
    assert d == [5, 10, 20, 600]
    assert next_delay(1, base=5, cap=600, jitter=0.0, rnd=0.5, retry_after=120) == 120
    assert next_delay(1, base=5, cap=600, jitter=0.0, rnd=0.5, retry_after=10**9) == 3600
    assert 4 <= next_delay(1, base=5, cap=600, jitter=0.2, rnd=0.0) < 5


def test_each_notification_says_why_in_alertmanagers_words():
    """notify/notify.go NotifyReason.String, as the dedup stage chooses it (dedup_stage.go needsUpdate)."""
    told = NotifyEntry(frozenset({"a"}), frozenset(), at=100.0)
    all_resolved = NotifyEntry(frozenset(), frozenset({"a"}), at=100.0)
    kw = {"now": 200.0, "repeat_interval": 3600.0}
    f, none = frozenset, frozenset()
    assert notify_reason(None, f({"a"}), none, **kw) == "first notification"
    assert notify_reason(all_resolved, f({"b"}), none, **kw) == "first notification"  # after a full resolve
    assert notify_reason(told, f({"a", "b"}), none, **kw) == "new alerts added"
    assert notify_reason(told, none, f({"a"}), **kw) == "all alerts resolved"
    assert notify_reason(told, f({"a"}), f({"c"}), **kw) == "some alerts resolved"
    assert (
        notify_reason(told, f({"a"}), none, now=3700.0, repeat_interval=3600.0) == "repeat interval elapsed"
    )
    assert notify_reason(told, f({"a"}), none, **kw) == ""


def test_fingerprints_are_alertmanagers_so_an_alert_is_the_same_alert_in_both():
    # Pinned values computed by Alertmanager's code (prometheus/common LabelSet.Fingerprint, through
    # tests/go/webhookcheck `fingerprint`); tests/alerting/test_alertmanager_body.py recomputes them there.
    assert fingerprint({"alertname": "WorkloadWaitWarning", "namespace": "team-a"}) == "a1b8968ea120b1da"
    assert fingerprint({"workload": "é", "a": ""}) == "b2f396d920c02abd"
    assert fingerprint({}) == "cbf29ce484222325"  # FNV-1a 64's offset basis: nothing hashed
    assert AlertCandidate({"b": "2", "a": "1"}).fingerprint == fingerprint({"a": "1", "b": "2"})


def test_an_integration_id_is_read_back_and_odd_text_is_none():
    from watchtower.domain.alerts.integration import IntegrationId

    i = IntegrationId("on-call", "webhook", 2)
    assert IntegrationId.parse(str(i)) == i
    for odd in ("on-call/webhook/²", "on-call/pager/0", "webhook/0", "on-call/email/x", ""):
        assert IntegrationId.parse(odd) is None, odd
