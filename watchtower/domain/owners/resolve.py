"""Who owns a workload: the `watchtower.dev/notify` annotation, else the configuration's team contact, else
nobody; and which annotation values are refused.

An annotation is written by whoever may create pods in the namespace, so its value is hostile until
checked: only addresses on an allowed domain and receivers the configuration allows are ever written to.
A URL is never taken from an annotation (a webhook is reached through a configured receiver, by its name),
so no annotation can make Watchtower call 127.0.0.1 or any host of its choosing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

NOTIFY_ANNOTATION = "watchtower.dev/notify"
OPT_OUT_VALUE = "off"  # `watchtower.dev/notify: "off"`: no notice, even from a team contact

# A value longer than this is refused whole, not cut: a cut list could name a different address. The
# decoder already cuts every kept annotation at 2,048 characters, so a 1 MB value arrives at that length.
MAX_VALUE = 1024
MAX_TARGETS_DEFAULT = 10

_ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&*+/=?^_`{|}~-]{1,64}@([A-Za-z0-9-]{1,63}\.)*[A-Za-z0-9-]{1,63}$")
_RECEIVER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")

Refusal = Literal[
    "header_injection",
    "too_long",
    "too_many",
    "url",
    "domain_not_allowed",
    "receiver_not_allowed",
    "malformed",
]
REFUSALS: tuple[Refusal, ...] = (
    "header_injection",
    "too_long",
    "too_many",
    "url",
    "domain_not_allowed",
    "receiver_not_allowed",
    "malformed",
)


@dataclass(frozen=True, slots=True)
class Contact:
    """A configured contact: a team's or a namespace's addresses or receiver (trusted: the operator's)."""

    team: str = ""
    namespace: str = ""
    email: tuple[str, ...] = ()
    receiver: str = ""


@dataclass(frozen=True, slots=True)
class OwnerPolicy:
    contacts: tuple[Contact, ...] = ()
    allowed_domains: frozenset[str] = frozenset()  # lower case; a subdomain of one is allowed too
    allowed_receivers: frozenset[str] = frozenset()  # receivers an annotation may name
    max_targets: int = MAX_TARGETS_DEFAULT


@dataclass(frozen=True, slots=True)
class Owner:
    """Where a workload's notices go: addresses (sent through the owners' SMTP settings) or one receiver."""

    emails: tuple[str, ...] = ()
    receiver: str = ""
    source: Literal["annotation", "contact"] = "contact"
    # A stable name of this owner for the rate limits and the message keys (no address in clear); computed
    # once, as every notice of a storm asks for it several times.
    id: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        text = f"receiver:{self.receiver}" if self.receiver else "email:" + ",".join(sorted(self.emails))
        object.__setattr__(self, "id", "owner_" + hashlib.sha256(text.encode()).hexdigest()[:20])


@dataclass(frozen=True, slots=True)
class Resolution:
    owner: Owner | None
    refused: Refusal | None = None  # why the annotation was refused (then the team contact is used)
    detail: str = ""  # the refused value's first characters, printable, for the log
    opted_out: bool = False
    dropped: tuple[str, ...] = field(default=())  # addresses refused one by one (their domain)


def _printable(text: str, n: int = 80) -> str:
    return text[:n].encode("unicode_escape").decode("ascii")


def _domain_allowed(address: str, allowed: frozenset[str]) -> bool:
    domain = address.rpartition("@")[2].lower().rstrip(".")
    return any(domain == d or domain.endswith("." + d) for d in allowed)


def check_annotation(value: str, policy: OwnerPolicy) -> tuple[Owner | None, Refusal | None]:
    """Return the owner an annotation value names, or why it is refused (never both)."""
    if "\r" in value or "\n" in value or "\x00" in value:
        return None, "header_injection"
    if len(value) > MAX_VALUE:
        return None, "too_long"
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        return None, "malformed"
    if len(parts) > policy.max_targets:
        return None, "too_many"
    if any("://" in p or p.lower().startswith(("http:", "https:")) for p in parts):
        return None, "url"
    if len(parts) == 1 and "@" not in parts[0]:
        name = parts[0]
        if not _RECEIVER.match(name):
            return None, "malformed"
        if name not in policy.allowed_receivers:
            return None, "receiver_not_allowed"
        return Owner(receiver=name, source="annotation"), None
    if not all(p.isascii() and _ADDRESS.match(p) for p in parts):
        return None, "malformed"
    if not all(_domain_allowed(p, policy.allowed_domains) for p in parts):
        return None, "domain_not_allowed"
    unique = tuple(dict.fromkeys(p.lower() for p in parts))
    return Owner(emails=unique, source="annotation"), None


def contact_for(namespace: str, team: str, policy: OwnerPolicy) -> Owner | None:
    """Return the configured contact of a namespace (first), else of its team; None when there is none."""
    for by_ns in (True, False):
        for c in policy.contacts:
            if (c.namespace == namespace) if by_ns else (bool(c.team) and c.team == team and not c.namespace):
                if c.receiver:
                    return Owner(receiver=c.receiver)
                if c.email:
                    return Owner(emails=tuple(dict.fromkeys(a.lower() for a in c.email)))
    return None


def resolve_owner(
    *, namespace: str, team: str, annotations: Mapping[str, str], policy: OwnerPolicy
) -> Resolution:
    """Return a workload's owner: its annotation's when that is valid, else its team contact, else none.

    A refused annotation falls back to the team contact (the work still has an owner the operator named),
    and says why it was refused so the caller counts and logs it. "off" opts out of every notice."""
    value = annotations.get(NOTIFY_ANNOTATION)
    refused: Refusal | None = None
    detail = ""
    if value is not None:
        if value.strip().lower() == OPT_OUT_VALUE:
            return Resolution(None, opted_out=True)
        owner, refused = check_annotation(value, policy)
        if owner is not None:
            return Resolution(owner)
        detail = _printable(value)
    return Resolution(contact_for(namespace, team, policy), refused, detail)


def first_annotation(candidates: Sequence[Mapping[str, str]]) -> Mapping[str, str]:
    """Return the first annotation set that names an owner (the workload's object before its pods')."""
    for a in candidates:
        if NOTIFY_ANNOTATION in a:
            return a
    return {}
