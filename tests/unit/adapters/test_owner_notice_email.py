"""The owner notice's email and webhook bodies, and the owner annotation through the real pod decoder:
escaped HTML, one-line headers, a hostile 1 MB annotation cut by the decoder and then refused."""

from __future__ import annotations

import orjson

from watchtower.adapters.email import build_owner_message
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.webhook import WebhookSender
from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.domain.owners.notices import Notice
from watchtower.domain.owners.payload import notice_payload
from watchtower.domain.owners.resolve import NOTIFY_ANNOTATION, OwnerPolicy, resolve_owner
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o

HOSTILE = Notice(
    "threshold",
    WorkloadKey("team-a", "Job", "train"),
    "1",
    {"alertname": "OwnerNotice"},
    "Job team-a/train has waited 2h\r\nBcc: everyone@corp.example",
    ("Why: <script>alert(1)</script> & more", "<@channel> look"),
    0.0,
)


def message(to: list[str]) -> OutboxMessage:
    return OutboxMessage(0, "own_abc", "owner-notices/email/0", "g", notice_payload(HOSTILE, to=to), 0.0)


def test_the_email_escapes_the_html_keeps_headers_one_line_and_goes_to_the_notices_addresses():
    em = build_owner_message(
        message(["ana@corp.example"]), sender="wt@corp.example", to=["x@corp.example"], at=0
    )
    assert em["To"] == "ana@corp.example"
    assert "\n" not in em["Subject"] and em["Bcc"] is None
    html = em.get_body(("html",)).get_content()
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp; more" in html
    text = em.get_body(("plain",)).get_content()
    assert "Why: <script>alert(1)</script> & more" in text


def test_through_a_receiver_the_email_goes_to_the_receivers_addresses():
    em = build_owner_message(message([]), sender="wt@corp.example", to=["team@corp.example"], at=0)
    assert em["To"] == "team@corp.example"


def test_the_slack_compatible_body_is_text_with_slacks_control_characters_escaped():
    sender = WebhookSender(url="http://127.0.0.1:9/", client=None, slack_compatible=True)  # type: ignore[arg-type]
    body, headers = sender.request_parts(message([]), now=0)
    doc = orjson.loads(body)
    assert set(doc) == {"text"} and "&lt;@channel&gt;" in doc["text"] and "<@channel>" not in doc["text"]
    assert headers["webhook-id"] == "own_abc"


def test_a_1mb_annotation_is_cut_by_the_decoder_then_refused_whole():
    dec = ObjectDecoder(read_notify=True)
    huge = ",".join(f"user{i}@corp.example" for i in range(60_000))  # about 1 MB
    pod = dec.decode(
        "Pod", orjson.dumps(o.pod(name="p", namespace="ns", created=0, annotations={NOTIFY_ANNOTATION: huge}))
    )
    assert 0 < len(pod.notify) <= 2048 and pod.annotations == {}
    r = resolve_owner(
        namespace="ns",
        team="ns",
        annotations={NOTIFY_ANNOTATION: pod.notify},
        policy=OwnerPolicy(allowed_domains=frozenset({"corp.example"})),
    )
    assert r.owner is None and r.refused == "too_long"


def test_without_owner_notices_the_annotation_is_not_read():
    pod = ObjectDecoder().decode(
        "Pod",
        orjson.dumps(o.pod(name="p", namespace="ns", created=0, annotations={NOTIFY_ANNOTATION: "a@b.c"})),
    )
    assert pod.notify == "" and pod.annotations == {}


def test_each_body_links_the_workloads_own_page_quoted():
    """An owner's first question is which workload and what now: each body links its page, its name quoted."""
    odd = Notice(
        "threshold", WorkloadKey("team-a", "Job", "train|x>y"), "1", {}, "Job team-a/train waits", (), 0.0
    )
    payload = notice_payload(odd, to=[], external_url="https://wt.corp.example/")
    url = "https://wt.corp.example/workloads/team-a/train%7Cx%3Ey?kind=Job"
    assert payload["workloadURL"] == url
    msg = OutboxMessage(0, "own_l", "owner-notices/email/0", "g", payload, 0.0)
    em = build_owner_message(msg, sender="wt@corp.example", to=["team@corp.example"], at=0)
    assert f"Its page on Watchtower: {url}" in em.get_body(("plain",)).get_content()
    assert f'<a href="{url}">Its page on Watchtower</a>' in em.get_body(("html",)).get_content()
    sender = WebhookSender(url="http://127.0.0.1:9/", client=None, slack_compatible=True)  # type: ignore[arg-type]
    body, _ = sender.request_parts(msg, now=0)
    assert orjson.loads(body)["text"].endswith(f"\n<{url}|Its page on Watchtower>")
    # Without external_url there is no page to link.
    assert notice_payload(odd, to=[])["workloadURL"] == ""
