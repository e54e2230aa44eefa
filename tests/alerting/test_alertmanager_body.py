"""Watchtower's webhook body, read by Alertmanager's own Go code (tests/go/webhookcheck, built against
github.com/prometheus/alertmanager v0.35.0): it decodes into notify/webhook.Message with unknown fields
refused and re-encodes to the same bytes; fingerprints, group keys, escaped receiver names and the order of
the alerts are the ones Alertmanager computes for the same labels and route tree."""

from __future__ import annotations

import httpx
import yaml

from alerts.alertmanager import alertmanager_config
from tests.alerting.alertmanager import check, check_json
from tests.alerting.helpers import SECRET, T0, settings
from watchtower.adapters.webhook import WebhookSender
from watchtower.domain.alerts.model import AlertState, TrackedAlert, fingerprint
from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.domain.alerts.payload import alertmanager_order, webhook_payload

# Labels that take every escaping path: quotes, backslashes, control characters, HTML, non-ASCII, the
# line separators JSON leaves alone and Go escapes, astral planes.
AWKWARD = [
    {"alertname": "WorkloadWaitWarning", "namespace": "team-a", "workload": "job-1", "kind": "PaddleJob"},
    {"alertname": "WorkloadWaitWarning", "namespace": "team-a", "workload": 'say "hi" \\ <b>&amp;</b>'},
    {"alertname": "WorkloadWaitCritical", "namespace": "équipe", "workload": "tab\there\nnew\x01line"},
    {"alertname": "GangStall", "namespace": "ns", "workload": "sep\u2028\u2029 nbsp\u00a0 😀", "job": "x"},
    {"alertname": "A", "instance": "i-2"},
    {"alertname": "A", "instance": "i-1", "extra": "1"},
    {},
]


def _alert(labels, state=AlertState.FIRING, at=T0 + 0.123456, resolved=None) -> TrackedAlert:
    return TrackedAlert(
        fingerprint(labels),
        labels,
        {"summary": f"waits <{labels.get('workload', '')}> & more", "status_url": "x"},
        state,
        active_at=at - 300,
        last_seen=at,
        fired_at=at,
        resolved_at=resolved,
    )


def _sent_bytes(payload) -> bytes:
    msg = OutboxMessage(0, "msg_1", "hook/webhook/0", "g", payload, T0)
    sender = WebhookSender(url="http://127.0.0.1:9/", client=httpx.AsyncClient(), secret=SECRET)
    body, _ = sender.request_parts(msg, now=T0)
    return body


def test_the_body_decodes_into_alertmanagers_message_and_re_encodes_to_the_same_bytes(webhookcheck):
    alerts = [_alert(ls) for ls in AWKWARD[:4]]
    alerts.append(_alert({"alertname": "Done", "namespace": "b"}, AlertState.RESOLVED, T0, resolved=T0 + 7.5))
    alerts.append(_alert({"alertname": "Whole", "namespace": "c"}, at=T0))  # no fraction at all
    payload = webhook_payload(
        receiver="on-call (team.a)+[x]",
        group_key='{}/{tier=~"critical|high"}:{alertname="WorkloadWaitWarning"}',
        group_labels={"alertname": "WorkloadWaitWarning", "namespace": "team-a"},
        alerts=alerts,
        external_url="https://watchtower.example/",
        reason="first notification",
    )
    ours = _sent_bytes(payload)
    theirs = check(webhookcheck, "body", ours).encode()
    assert theirs == ours
    # The forms a receiver reads: Go's shortest times, the zero time of a firing alert, the escaped name.
    first = payload["alerts"]
    assert {a["startsAt"] for a in first} >= {"2025-10-09T08:53:20.123456Z", "2025-10-09T08:53:20Z"}
    assert payload["receiver"] == r"on-call \(team\.a\)\+\[x\]"
    assert "routeLabels" in payload and payload["notification_reason"] == "first notification"


def test_an_unknown_field_is_refused_by_alertmanagers_decoder(webhookcheck):
    """The check is not a rubber stamp: a key Alertmanager's Message lacks fails the decode."""
    import subprocess

    done = subprocess.run(
        [webhookcheck, "body"], input=b'{"version":"4","groupKey":"","alertz":[]}', capture_output=True
    )
    assert done.returncode != 0 and b"unknown field" in done.stderr


def test_fingerprints_are_alertmanagers(webhookcheck):
    theirs = check_json(webhookcheck, "fingerprint", AWKWARD)
    assert [fingerprint(ls) for ls in AWKWARD] == theirs


def test_generator_url_links_each_alert_to_its_workloads_page():
    alerts = [_alert(AWKWARD[0]), _alert({"alertname": "WatchtowerUnreachable"})]
    body = webhook_payload(
        receiver="r", group_key="k", group_labels={}, alerts=alerts, external_url="https://wt.example"
    )
    urls = {a["labels"].get("workload", ""): a["generatorURL"] for a in body["alerts"]}
    assert urls == {
        "job-1": "https://wt.example/workloads/team-a/job-1?kind=PaddleJob",
        "": "https://wt.example/",
    }


def test_alerts_come_in_the_order_alertmanager_flushes_them(webhookcheck):
    sets = AWKWARD + [
        {"alertname": "B", "namespace": "a"},
        {"alertname": "B", "team": "a"},
        {"alertname": "B", "namespace": "b"},
        {"alertname": "Ba", "namespace": "a"},
        {"alertname": "B", "job": "j", "zzz": ""},
    ]
    theirs = [int(i) for i in check_json(webhookcheck, "order", sets)]
    ours = alertmanager_order([_alert(ls) for ls in sets])
    assert [dict(a.labels) for a in ours] == [sets[i] for i in theirs]


ROUTING = {
    "route": {
        "receiver": "platform",
        "group_by": ["alertname", "namespace"],
        "routes": [
            {
                "matchers": ['team="vision"', 'tier=~"critical|high"'],
                "receiver": "vision.pager",
                "routes": [{"matchers": ['severity!="info"', 'workload=~"a.*"'], "receiver": "vision.deep"}],
            },
            {"matchers": ['namespace="say \\"hi\\""'], "receiver": "quoted", "group_by": ["..."]},
            {"matchers": ['tier="low"'], "receiver": "batch", "continue": True, "group_by": []},
            {"matchers": ['tier="low"', 'team!="x"'], "receiver": "batch-too"},
        ],
    },
    "receivers": [
        {"name": n, "webhooks": [{"url": "https://hooks.example/" + str(i)}]}
        for i, n in enumerate(["platform", "vision.pager", "vision.deep", "quoted", "batch", "batch-too"])
    ],
}


def test_group_keys_and_receivers_are_the_ones_alertmanager_gives_the_same_tree(webhookcheck, tmp_path):
    s = settings(ROUTING)
    path = tmp_path / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(alertmanager_config(s)))
    sets = [
        {"alertname": "W", "namespace": "a", "team": "vision", "tier": "high", "workload": "abc"},
        {"alertname": "W", "namespace": "a", "team": "vision", "tier": "critical", "severity": "info"},
        {"alertname": "W", "namespace": 'say "hi"', "team": "nlp", "workload": "é\n"},
        {"alertname": "W", "namespace": "b", "tier": "low"},
        {"alertname": "W", "namespace": "c", "tier": "medium"},
    ]
    theirs = check_json(webhookcheck, "route", sets, str(path))
    tree = s.alerting.route_tree()
    ours = []
    for ls in sets:
        for r in tree.match(ls):
            body = webhook_payload(
                receiver=r.receiver,
                group_key=r.alertmanager_group_key(r.group_labels(ls)),
                group_labels=r.group_labels(ls),
                alerts=[],
                external_url="",
            )
            ours.append(f"{r.receiver}\t{body['groupKey']}\t{body['receiver']}")
    assert ours == theirs
    assert len(theirs) == 6  # the low tier lands on two routes (continue)
