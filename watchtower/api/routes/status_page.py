"""The status page at `/`: server-rendered HTML, every user-controlled string escaped by Jinja2."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from ..deps import ContainerDep
from ..status_view import alerts_context, gpu_context, page_context

router = APIRouter(tags=["status page"])

# Escaping is the defence; the policy is a second one: no script, no external fetch, whatever a name holds.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


class PageRenderer:
    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("watchtower.api", "templates"),
            autoescape=select_autoescape(["html"], default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(self, context: dict[str, object]) -> str:
        return self.env.get_template("status.html").render(**context)


@router.get("/", response_class=HTMLResponse)
async def status_page(request: Request, container: ContainerDep) -> HTMLResponse:
    # On the event loop, where alerting and GPU usage change their state: no half-updated reads.
    watcher = container.watcher
    tick = watcher.latest
    docs = container.documents.for_tick(tick) if tick is not None else None
    ctx = page_context(
        tick=tick,
        docs=docs,
        readiness=watcher.readiness(),
        tiers=list(watcher.policy.tiers.tiers),
        source=container.source_name,
        sim_speed=container.settings.simulator.speed if container.source_name == "sim" else None,
    )
    now = container.clock.now()
    ctx.update(
        alerts_context(container.alerting.admin if container.alerting else None, container.alert_store, now)
    )
    # Prometheus's figures are as of the wall clock, whatever clock the cluster runs on.
    ctx.update(
        gpu_context(container.gpu.report() if container.gpu is not None else None, wall_now=time.time())
    )
    ctx["links"] = sorted(container.links.items())
    renderer: PageRenderer = request.app.state.pages
    html = renderer.render(ctx)
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )
