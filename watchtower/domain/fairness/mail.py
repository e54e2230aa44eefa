"""A rendered weekly report as an outbox payload: everything the email sender needs, fixed at enqueue.

The report is rendered once, when it is enqueued: every attempt, and the one duplicate a crash mid-send
may cause, carries the same bytes. Binary parts are base64 text, since the outbox stores JSON.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REPORT_KIND = "fairness-report"  # payload["kind"]; alert notifications carry no kind


@dataclass(frozen=True, slots=True)
class InlineImage:
    cid: str  # the HTML references it as `cid:<cid>`
    png: bytes


@dataclass(frozen=True, slots=True)
class Attachment:
    filename: str
    content_type: str  # "text/csv"
    data: bytes


@dataclass(frozen=True, slots=True)
class ReportMail:
    subject: str
    to: tuple[str, ...]
    text: str
    html: str
    images: tuple[InlineImage, ...]
    attachments: tuple[Attachment, ...]
    message_id_key: str = ""  # the idempotency key the Message-ID is made from

    def to_payload(self) -> dict[str, Any]:
        return {
            "kind": REPORT_KIND,
            "subject": self.subject,
            "to": list(self.to),
            "text": self.text,
            "html": self.html,
            "images": [{"cid": i.cid, "png": base64.b64encode(i.png).decode()} for i in self.images],
            "attachments": [
                {"filename": a.filename, "type": a.content_type, "data": base64.b64encode(a.data).decode()}
                for a in self.attachments
            ],
            "key": self.message_id_key,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ReportMail:
        """Read a payload back; raise ValueError when it is not a report's (or is damaged)."""
        if p.get("kind") != REPORT_KIND:
            raise ValueError("not a fairness report payload")
        try:
            return cls(
                subject=str(p["subject"]),
                to=tuple(str(a) for a in p["to"]),
                text=str(p["text"]),
                html=str(p["html"]),
                images=tuple(
                    InlineImage(str(i["cid"]), base64.b64decode(i["png"], validate=True)) for i in p["images"]
                ),
                attachments=tuple(
                    Attachment(str(a["filename"]), str(a["type"]), base64.b64decode(a["data"], validate=True))
                    for a in p["attachments"]
                ),
                message_id_key=str(p.get("key", "")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"damaged fairness report payload: {e}") from None


def is_report(payload: Mapping[str, Any]) -> bool:
    return payload.get("kind") == REPORT_KIND
