"""Where a notification goes: one email or webhook entry of a receiver, named `<receiver>/<kind>/<index>`.

The text form is what the outbox, the notification log and the API store and show; it is built and read
here only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal["email", "webhook"]


@dataclass(frozen=True, slots=True)
class IntegrationId:
    receiver: str
    kind: Kind
    index: int

    def __str__(self) -> str:
        return f"{self.receiver}/{self.kind}/{self.index}"

    @staticmethod
    def parse(text: str) -> IntegrationId | None:
        """Return the id a text form names; None for one that is not `<receiver>/<email|webhook>/<n>`."""
        receiver, _, rest = text.rpartition("/")
        receiver, _, kind = receiver.rpartition("/")
        if not receiver or not (rest.isascii() and rest.isdigit()):
            return None
        for k in get_args(Kind):
            if kind == k:
                return IntegrationId(receiver, k, int(rest))
        return None


@dataclass(frozen=True, slots=True)
class Integration:
    id: IntegrationId
    send_resolved: bool

    @property
    def receiver(self) -> str:
        return self.id.receiver

    @property
    def key(self) -> str:
        """The text form, as the store keys it."""
        return str(self.id)
