"""Silences: matchers plus a time window; an active silence mutes every alert it matches."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from .matchers import Matcher, all_match


class SilenceState(StrEnum):
    PENDING = "pending"  # starts in the future
    ACTIVE = "active"
    EXPIRED = "expired"


class SilenceError(ValueError):
    """A silence that cannot be created, with the reason in plain words."""


@dataclass(frozen=True, slots=True)
class Silence:
    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float
    ends_at: float
    created_by: str
    comment: str
    created_at: float
    updated_at: float

    def state(self, now: float) -> SilenceState:
        if now >= self.ends_at:
            return SilenceState.EXPIRED
        if now < self.starts_at:
            return SilenceState.PENDING
        return SilenceState.ACTIVE

    def mutes(self, labels: Mapping[str, str], now: float) -> bool:
        return self.state(now) is SilenceState.ACTIVE and all_match(self.matchers, labels)


def new_silence(
    *,
    id: str,
    matchers: Iterable[Matcher],
    starts_at: float,
    ends_at: float,
    created_by: str,
    comment: str,
    now: float,
) -> Silence:
    """Return a validated silence; raise SilenceError when it would mute nothing or everything by mistake."""
    ms = tuple(matchers)
    if not ms:
        raise SilenceError("a silence needs at least one matcher")
    if all(m.matches({}) for m in ms):
        # Alertmanager refuses these too: a silence matching the empty label set mutes every alert.
        raise SilenceError("these matchers match every alert; add one that needs a label value")
    if ends_at <= starts_at:
        raise SilenceError("the silence ends before it starts")
    if ends_at <= now:
        raise SilenceError("the silence would already be expired")
    if not created_by.strip():
        raise SilenceError("say who creates the silence (created_by)")
    if not comment.strip():
        raise SilenceError("say why (comment)")
    return Silence(id, ms, starts_at, ends_at, created_by, comment, now, now)


def expire(s: Silence, now: float) -> Silence:
    """Return the silence ended at `now` (a pending one never starts); an expired one is unchanged."""
    if s.state(now) is SilenceState.EXPIRED:
        return s
    return replace(s, starts_at=min(s.starts_at, now), ends_at=now, updated_at=now)


def silenced_by(labels: Mapping[str, str], silences: Iterable[Silence], now: float) -> list[str]:
    """Return the ids of the active silences that mute this label set."""
    return [s.id for s in silences if s.mutes(labels, now)]
