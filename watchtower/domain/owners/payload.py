"""An owner notice as it waits in the outbox: plain JSON data the email and webhook senders render.

Its own shape (not Alertmanager's webhook body): an owner's message names one workload, or lists the
owner's own workloads in a digest, and carries no other alert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from watchtower.domain.alerts.rules.base import workload_path

from .notices import Digest, Notice

OWNER_NOTICE_VERSION = "watchtower.owner-notice/v1"


def notice_payload(n: Notice, *, to: Sequence[str], external_url: str = "") -> dict[str, Any]:
    return {
        "version": OWNER_NOTICE_VERSION,
        "kind": n.kind,
        "to": list(to),
        "subject": n.subject,
        "lines": list(n.lines),
        "labels": dict(n.labels),
        "workload": {"namespace": n.workload.namespace, "kind": n.workload.kind, "name": n.workload.name},
        "at": n.at,
        "externalURL": external_url,
        # The owner's first question is "which one, and what now": the workload's own page, not the front page.
        "workloadURL": (
            external_url.rstrip("/") + workload_path(n.workload.namespace, n.workload.name, n.workload.kind)
            if external_url
            else ""
        ),
    }


def digest_payload(d: Digest, *, to: Sequence[str], external_url: str = "") -> dict[str, Any]:
    return {
        "version": OWNER_NOTICE_VERSION,
        "kind": "digest",
        "to": list(to),
        "subject": d.subject,
        "lines": list(d.lines),
        "labels": {},
        "workloads": [
            {
                "namespace": n.workload.namespace,
                "kind": n.workload.kind,
                "name": n.workload.name,
                "notice": n.kind,
            }
            for n in d.notices
        ],
        "at": d.at,
        "externalURL": external_url,
    }


def is_owner_notice(payload: Mapping[str, Any]) -> bool:
    return payload.get("version") == OWNER_NOTICE_VERSION


def notice_text(payload: Mapping[str, Any]) -> str:
    """Return the plain text of a notice: its subject, then one line each."""
    lines = [str(x) for x in payload.get("lines", [])]
    url = payload.get("workloadURL") or ""
    base = payload.get("externalURL") or ""
    tail = ["", f"Its page on Watchtower: {url}"] if url else (["", f"Watchtower: {base}"] if base else [])
    return "\n".join([str(payload.get("subject", "")), "", *lines, *tail]) + "\n"


def slack_notice(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Return the Slack-compatible body (an incoming webhook's `text`, mrkdwn) of a notice."""
    lines = [str(x) for x in payload.get("lines", [])]
    text = f"*{_slack_escape(str(payload.get('subject', '')))}*\n" + "\n".join(
        _slack_escape(x) for x in lines
    )
    url = str(payload.get("workloadURL") or "")
    if url.startswith(("http://", "https://")):
        # Ours (external_url and a quoted path): no character of Slack's link syntax can be in it unquoted.
        text += f"\n<{_slack_escape(url)}|Its page on Watchtower>"
    return {"text": text}


def _slack_escape(text: str) -> str:
    # Slack's three control characters: a workload's words cannot mention @channel or make a link.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
