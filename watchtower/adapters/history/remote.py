"""Another cluster's fairness history, read over its Watchtower's API (`GET /api/v1/fairness/history`) for
the fleet report, and served to the report builder as the FairnessHistory it would read from its own store.
Read-only: recording, pruning and the open waits belong to that cluster's service."""

from __future__ import annotations

from collections.abc import Iterable

import httpx
import msgspec

from watchtower.domain.fairness.fleet import HistoryWeek
from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode


class HistoryUnavailable(Exception):
    """The cluster's Watchtower did not answer with its history (down, refused, not one)."""


async def fetch_history(
    http: httpx.AsyncClient, url: str, week: str, *, token: str | None, timeout: float = 10.0
) -> HistoryWeek:
    """Return `week`'s history from the Watchtower at `url`; HistoryUnavailable saying why when it cannot."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    where = f"{url.rstrip('/')}/api/v1/fairness/history"
    try:
        r = await http.get(where, params={"week": week}, headers=headers, timeout=timeout)
    except httpx.HTTPError as e:
        raise HistoryUnavailable(f"{where}: no answer ({type(e).__name__}: {e})") from e
    if r.status_code != 200:
        detail = r.text[:200].strip()
        raise HistoryUnavailable(f"{where}: HTTP {r.status_code} {detail}")
    try:
        return msgspec.json.decode(r.content, type=HistoryWeek)
    except msgspec.ValidationError as e:
        raise HistoryUnavailable(f"{where}: not a fairness history ({e})") from e


class WeekHistory:
    """A HistoryWeek as the report builder's FairnessHistory: the same range filters the stores apply."""

    def __init__(self, got: HistoryWeek) -> None:
        self.got = got

    def record(
        self,
        episodes: Iterable[WaitEpisode] = (),
        preemptions: Iterable[PreemptionRecord] = (),
        incidents: Iterable[Incident] = (),
        *,
        heartbeats: Iterable[float] = (),
    ) -> None:
        raise NotImplementedError("another cluster's history is read-only")

    def episodes(self, start: float, end: float) -> list[WaitEpisode]:
        return [e for e in self.got.episodes if e.started < end and (e.ended is None or e.ended >= start)]

    def preemptions(self, start: float, end: float) -> list[PreemptionRecord]:
        return [p for p in self.got.preemptions if start <= p.at < end]

    def incidents(self, start: float, end: float) -> list[Incident]:
        return [i for i in self.got.incidents if i.started < end and (i.ended is None or i.ended >= start)]

    def history_coverage(self, start: float, end: float) -> float:
        if (start, end) != (self.got.start, self.got.end):
            raise ValueError("the history of another cluster is read for its week's bounds only")
        return self.got.history_hours

    def prune_history(self, before: float) -> int:
        return 0

    def open_waits(self) -> tuple[list[WaitEpisode], list[Incident]]:
        return [], []

    def close(self) -> None:
        return None
