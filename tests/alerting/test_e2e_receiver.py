"""The e2e tests' signed webhook receiver (tests/e2e/webhooks.py) against Watchtower's real webhook sender,
no control plane needed: what the e2e tests conclude from it (every delivery signed, when the leader's last
one arrived) holds only if it accepts what Watchtower signs, refuses what it does not, and stamps a
delivery when it arrives, not when its `delay` is over."""

from __future__ import annotations

import time

import httpx

from tests.e2e.webhooks import HookReceiver, new_secret
from watchtower.adapters.webhook import WebhookSender
from watchtower.domain.alerts.outbox import OutboxMessage, Outcome

PAYLOAD = {
    "groupKey": '{}:{alertname="WorkloadWaitWarning"}',
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "WorkloadWaitWarning", "namespace": "ns", "workload": "w"},
        },
        {
            "status": "resolved",
            "labels": {"alertname": "WorkloadWaitWarning", "namespace": "ns", "workload": "v"},
        },
    ],
}


async def test_the_receiver_keeps_what_watchtower_signs_refuses_a_wrong_key_and_stamps_arrival() -> None:
    delay = 0.3
    receiver = HookReceiver(new_secret(), delay=delay).start()
    try:
        async with httpx.AsyncClient() as client:
            signed = WebhookSender(url=receiver.url, client=client, secret=receiver.secret)
            forged = WebhookSender(url=receiver.url, client=client, secret=new_secret())
            sent = time.time()
            good = await signed.send(
                OutboxMessage(0, "msg_1", "hook/webhook/0", "g", PAYLOAD, sent), now=sent
            )
            answered = time.time()
            bad = await forged.send(OutboxMessage(0, "msg_2", "hook/webhook/0", "g", PAYLOAD, sent), now=sent)
    finally:
        receiver.stop()
    assert good.outcome == Outcome.SENT, good
    assert bad.outcome == Outcome.REJECTED and "HTTP 401" in bad.detail, bad
    first, second = receiver.received()
    assert (first.webhook_id, first.problem) == ("msg_1", "")
    assert second.webhook_id == "msg_2" and second.problem.startswith("no v1 signature matches")
    # What the storm audit reads: the firing alert's workload, and the notification's content.
    assert first.firing("WorkloadWaitWarning") == [("ns", "w")]
    assert first.content() == second.content()
    # Answered after the delay, stamped on arrival: a leader's last delivery is timed when it reached us.
    assert answered - sent >= delay
    assert sent <= first.arrived < sent + delay
