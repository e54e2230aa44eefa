"""Why alerts are not notified: silences that match them and firing alerts that inhibit them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .inhibition import InhibitRule, inhibited
from .model import TrackedAlert
from .silences import Silence, silenced_by


@dataclass(frozen=True, slots=True)
class Muted:
    silenced_by: tuple[str, ...] = ()  # silence ids
    inhibited_by: tuple[str, ...] = ()  # fingerprints of the inhibiting alerts

    def __bool__(self) -> bool:
        return bool(self.silenced_by or self.inhibited_by)


NOT_MUTED = Muted()


def muted(
    alerts: Sequence[TrackedAlert], silences: Iterable[Silence], rules: Iterable[InhibitRule], *, now: float
) -> dict[str, Muted]:
    """Return fingerprint → why it is muted, for the alerts that are (the others are absent)."""
    sil = list(silences)
    inhibitors = inhibited(alerts, rules)
    out: dict[str, Muted] = {}
    for a in alerts:
        ids = tuple(silenced_by(a.labels, sil, now)) if sil else ()
        src = inhibitors.get(a.fingerprint)
        if ids or src is not None:
            out[a.fingerprint] = Muted(ids, (src,) if src is not None else ())
    return out
