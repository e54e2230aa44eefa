"""The fleet page's reads: each other cluster's Watchtower, over its JSON API, concurrently, with one short
deadline per cluster. Nothing is kept between visits."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from watchtower.config.fleet import FleetCluster, FleetConfig
from watchtower.domain.fleet import FleetRow, firing_alerts, free_gpus, idle_gpus, missing_row, tier_line

# The gauge of `/metrics` that gives the GPUs of schedulable nodes by `state` (allocatable, used).
GPUS_GAUGE = "watchtower_gpus{"


class _Unanswered(Exception):
    """The cluster's answer cannot be used: said on its row."""


def gpus_gauge(text: str) -> dict[str, float]:
    """Return `state` → value of the `watchtower_gpus` series in a Prometheus text exposition."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(GPUS_GAUGE):
            labels, _, value = line.rpartition(" ")
            state = labels.partition('state="')[2].partition('"')[0]
            try:
                out[state] = float(value)
            except ValueError:
                continue
    return out


class HttpFleetReader:
    """A `FleetReader` over httpx: every cluster at once, each within `fleet.timeout`."""

    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg

    async def rows(self, tiers: Sequence[str]) -> list[FleetRow]:
        async with httpx.AsyncClient(timeout=self.cfg.timeout) as client:
            return list(await asyncio.gather(*(self._row(client, c, tiers) for c in self.cfg.clusters)))

    async def _row(self, client: httpx.AsyncClient, c: FleetCluster, tiers: Sequence[str]) -> FleetRow:
        link = c.url + "/"
        try:
            async with asyncio.timeout(self.cfg.timeout):
                answers = await _answers(client, c, tiers)
        except TimeoutError:
            return missing_row(c.name, link, f"no answer within {self.cfg.timeout:g} s")
        except (ExceptionGroup, _Unanswered, httpx.HTTPError) as e:
            return missing_row(c.name, link, _why(e))
        queues, alerts, idle, metrics = answers
        try:
            lines = tuple(tier_line(t, q) for t, q in zip(tiers, queues, strict=True))
            return FleetRow(
                c.name,
                link,
                tiers=lines,
                firing=firing_alerts(alerts),
                gpus_free=free_gpus(gpus_gauge(metrics) if metrics is not None else None),
                gpus_idle=idle_gpus(idle),
                notes=tuple(f"no tier {t.tier!r} there" for t in lines if t.waiting is None),
            )
        except (TypeError, ValueError, AttributeError, KeyError) as e:
            return missing_row(c.name, link, f"answered JSON of another shape: {type(e).__name__} {e}")


def _why(e: BaseException) -> str:
    """Return what made the first of the reads fail, in a few words."""
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    if isinstance(e, _Unanswered):
        return str(e)
    return f"unreachable: {type(e).__name__} {e}".strip()


Answers = tuple[list[Any], Any, Any, str | None]


async def _answers(client: httpx.AsyncClient, c: FleetCluster, tiers: Sequence[str]) -> Answers:
    """Return (each tier's waiting queue, the alerts, the idle GPUs, the metrics text), read at once."""
    headers = _auth(c)
    async with asyncio.TaskGroup() as tg:
        queues = [
            tg.create_task(
                _json(
                    client,
                    c.url,
                    "/api/v1/queue",
                    headers,
                    {"tier": t, "state": "waiting", "limit": "1"},
                    absent=(422,),  # no such tier there
                )
            )
            for t in tiers
        ]
        alerts = tg.create_task(_json(client, c.url, "/api/v1/alerts", headers, absent=(404,)))
        idle = tg.create_task(_json(client, c.url, "/api/v1/gpu/idle", headers, absent=(404,)))
        metrics = tg.create_task(_text(client, c.url, "/metrics", headers))
    return [q.result() for q in queues], alerts.result(), idle.result(), metrics.result()


def _auth(c: FleetCluster) -> dict[str, str]:
    if c.token_file is None:
        return {}
    try:
        token = Path(c.token_file).read_text().strip()
    except OSError as e:
        raise _Unanswered(f"its token_file cannot be read: {e.strerror or e}") from None
    return {"Authorization": f"Bearer {token}"}


async def _get(
    client: httpx.AsyncClient,
    base: str,
    path: str,
    headers: dict[str, str],
    params: dict[str, str] | None = None,
) -> httpx.Response:
    return await client.get(base + path, headers=headers, params=params)


async def _json(
    client: httpx.AsyncClient,
    base: str,
    path: str,
    headers: dict[str, str],
    params: dict[str, str] | None = None,
    *,
    absent: tuple[int, ...] = (),
) -> Any:
    r = await _get(client, base, path, headers, params)
    if r.status_code in absent:
        return None
    if r.status_code != 200:
        raise _Unanswered(f"{path} answered HTTP {r.status_code}")
    try:
        return orjson.loads(r.content)
    except orjson.JSONDecodeError:
        raise _Unanswered(f"{path} did not answer JSON") from None


async def _text(client: httpx.AsyncClient, base: str, path: str, headers: dict[str, str]) -> str | None:
    r = await _get(client, base, path, headers)
    return r.text if r.status_code == 200 else None
