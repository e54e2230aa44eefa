"""Who gets which weekly report, and the key that makes each send happen once per ISO week per recipient.

The platform list gets the whole report (the cluster and every team); a team's addresses come from
`fairness.team_recipients`, else from the annotation on the team's namespaces. An address is sent one
report a week: the whole one when it is on the platform list, else the report of the teams that list it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# The address form the configuration accepts (config.fairness): one local part, one domain, nothing that
# could close a header or add a recipient.
_ADDRESS = re.compile(r"^[^@\s<>,;\"'()\\\[\]:]+@[A-Za-z0-9.-]+\.?[A-Za-z0-9-]*$")
_MAX_ADDRESS = 254  # RFC 5321's limit on a path


def valid_address(text: str) -> bool:
    return len(text) <= _MAX_ADDRESS and text.isascii() and bool(_ADDRESS.match(text))


def parse_addresses(text: str) -> tuple[list[str], list[str]]:
    """Return (valid, refused) addresses of a comma-separated annotation value; blanks are ignored."""
    good: list[str] = []
    bad: list[str] = []
    for part in text.split(","):
        a = part.strip()
        if not a:
            continue
        (good if valid_address(a) else bad).append(a)
    return good, bad


@dataclass(frozen=True, slots=True)
class Recipient:
    address: str
    teams: tuple[str, ...] | None  # None: the whole report (the platform list)

    @property
    def scope(self) -> str:
        return "cluster" if self.teams is None else "teams"


def report_recipients(
    *,
    teams: Iterable[str],
    platform: Sequence[str],
    configured: Mapping[str, Sequence[str]],
    annotated: Mapping[str, Sequence[str]],
) -> list[Recipient]:
    """Return each address once, with what it is sent, ordered by address.

    `configured` is `fairness.team_recipients`; `annotated` the valid addresses found on each team's
    namespaces, used for a team `configured` has no entry for. Addresses compare without case."""
    whole: dict[str, str] = {}
    for a in platform:
        whole.setdefault(a.lower(), a)
    per: dict[str, tuple[str, set[str]]] = {}
    for team in teams:
        for a in configured.get(team, annotated.get(team, ())):
            k = a.lower()
            if k in whole:
                continue  # the whole report already has the team's
            per.setdefault(k, (a, set()))[1].add(team)
    out = [Recipient(a, None) for a in whole.values()]
    out += [Recipient(a, tuple(sorted(ts))) for a, ts in per.values()]
    return sorted(out, key=lambda r: r.address.lower())


def send_key(week: str, address: str) -> str:
    """Return the idempotency key of one week's report to one address: `fairness:<week>:<address>`."""
    return f"fairness:{week}:{address.lower()}"


def message_id(key: str, domain: str) -> str:
    """Return the Message-ID of the email a key names: the same for every attempt, so a mail system can
    drop the one duplicate a crash mid-send may cause; a hash, so no address text lands in the header."""
    return f"<fairness.{hashlib.sha256(key.encode()).hexdigest()[:32]}@{domain}>"


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


def one_line(text: str, limit: int = 200) -> str:
    """Return text fit for a header or a subject: control characters (CR, LF, ...) become spaces, runs of
    spaces one, cut to `limit` characters."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
