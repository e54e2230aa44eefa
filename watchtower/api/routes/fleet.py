"""The fleet page (`/fleet`) and its JSON (`/api/v1/fleet`): one row per cluster, this one first, the others
read from their Watchtowers' JSON API at each visit (`fleet.clusters`); nothing is stored."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from watchtower.domain.fleet import FleetRow, firing_alerts, idle_gpus, tier_line

from ..container import Container
from ..deps import ContainerDep
from ..schemas.fleet import Fleet
from .alerts import alert_dict
from .queue import WAITING
from .status_page import PageRenderer, page_response

router = APIRouter(tags=["fleet"])


def here_row(container: Container, tiers: list[str]) -> FleetRow:
    """Return this cluster's row from what its own API would answer (the same documents and alerts)."""
    s = container.settings
    name = s.cluster.name or container.source_name
    url = s.server.external_url.rstrip("/") + "/"
    tick = container.queue_tracker.latest
    if tick is None:
        return FleetRow(name, url, here=True, missing="no picture of the cluster yet (starting)")
    docs = container.documents.for_tick(tick)
    waiting = frozenset(WAITING)
    lines = tuple(
        tier_line(t, orjson.loads(docs.queue_json(tiers=frozenset({t}), states=waiting, limit=1)))
        for t in tiers
    )
    admin = container.alerting.admin if container.alerting is not None else None
    alerts = (
        [alert_dict(a, m) for a, m in admin.listed_alerts(container.clock.now())]
        if admin is not None
        else None
    )
    return FleetRow(
        name,
        url,
        here=True,
        tiers=lines,
        firing=firing_alerts(alerts),
        gpus_free=tick.snapshot.capacity.free_total,
        gpus_idle=idle_gpus(container.gpu.report() if container.gpu is not None else None),
    )


async def fleet_rows(container: Container) -> list[FleetRow]:
    tiers = [t.name for t in container.queue_tracker.policy.tiers.tiers]
    others = await container.fleet.rows(tiers) if container.fleet is not None else []
    return [here_row(container, tiers), *others]


@router.get("/api/v1/fleet", response_model=Fleet)
async def fleet_json(container: ContainerDep) -> dict[str, Any]:
    """This cluster and the others of `fleet.clusters`, as their Watchtowers answer now: waiting work per
    tier and its longest wait against the tier's thresholds, firing alerts, free and idle GPUs. A cluster
    that did not answer within `fleet.timeout` has `answered: false` and says why in `missing`."""
    rows = await fleet_rows(container)
    return {"clusters": [r.as_json() for r in rows]}


@router.get("/fleet", response_class=HTMLResponse, include_in_schema=False)
async def fleet_page(request: Request, container: ContainerDep) -> HTMLResponse:
    rows = await fleet_rows(container)
    tiers = [t.name for t in container.queue_tracker.policy.tiers.tiers]
    renderer: PageRenderer = request.app.state.pages
    return page_response(
        renderer.render_page(
            "fleet.html",
            {"rows": rows, "tiers": tiers, "missing": [r for r in rows if r.missing is not None]},
        )
    )
