"""The `owners:` section: owner notices, who gets them and how often (docs/owner-notices.md)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from watchtower.domain.owners.notices import Limits
from watchtower.domain.owners.resolve import Contact, OwnerPolicy

from .durations import PositiveDuration
from .fairness import email_addresses

_DOMAIN = re.compile(r"^([a-z0-9-]{1,63}\.)*[a-z0-9-]{1,63}$")


class Section(BaseModel):
    # As model.Section; not imported from there because model.py imports this module.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ContactConfig(Section):
    """A team's or a namespace's contact: addresses or one receiver of `alerting.receivers`."""

    team: str = ""
    """The team (the `teams.label` value) this contact is for."""
    namespace: str = ""
    """The namespace this contact is for (a namespace's contact wins over its team's)."""
    email: list[str] = []
    """Addresses the notices go to (sent through `owners.smtp_receiver`'s SMTP settings)."""
    receiver: str = ""
    """A receiver of `alerting.receivers` the notices go to (its email and webhook entries)."""

    _emails = field_validator("email")(email_addresses)

    @model_validator(mode="after")
    def _one_of_each(self) -> ContactConfig:
        if bool(self.team) == bool(self.namespace):
            raise ValueError("a contact names one team or one namespace")
        if bool(self.email) == bool(self.receiver):
            raise ValueError("a contact has email addresses or a receiver")
        return self


class OwnersConfig(Section):
    """Owner notices: a workload's owner hears when it passes its tier's warning threshold, is preempted, or starts after waiting past it."""

    enabled: bool = False
    """Send owner notices (the leader sends them through the alert outbox)."""
    contacts: list[ContactConfig] = []
    """Team and namespace contacts, used when a workload's pods carry no valid `watchtower.dev/notify` annotation."""
    allowed_domains: list[str] = []
    """Email domains an annotation may name (a subdomain of one too); an address elsewhere is refused."""
    allowed_receivers: list[str] = []
    """Receivers of `alerting.receivers` an annotation may name; any other name is refused."""
    smtp_receiver: str = ""
    """Name of the email receiver in `alerting.receivers` whose SMTP settings send to owners' addresses; empty: the first email receiver."""
    max_addresses: int = Field(10, ge=1, le=100)
    """Addresses one annotation may name; more and the annotation is refused whole."""
    per_workload_interval: PositiveDuration = 3600.0
    """At most one message about one workload this often; a later notice waits for its turn."""
    daily_limit: int = Field(10, ge=1)
    """Messages one owner gets a day; the notices beyond wait in one digest, sent when the day has room."""
    preempted_within: PositiveDuration = 900.0
    """A preemption older than this when first seen (at start-up) is not notified."""

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, v: list[str]) -> list[str]:
        out = [d.strip().lower().rstrip(".") for d in v]
        for d in out:
            if not _DOMAIN.match(d):
                raise ValueError(f"not a domain: {d!r}")
        return out

    def policy(self) -> OwnerPolicy:
        return OwnerPolicy(
            contacts=tuple(Contact(c.team, c.namespace, tuple(c.email), c.receiver) for c in self.contacts),
            allowed_domains=frozenset(self.allowed_domains),
            allowed_receivers=frozenset(self.allowed_receivers),
            max_targets=self.max_addresses,
        )

    def limits(self) -> Limits:
        return Limits(per_workload=self.per_workload_interval, daily=self.daily_limit)
