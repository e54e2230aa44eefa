"""The status page at `/`: server-rendered HTML, every user-controlled string escaped by Jinja2."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from watchtower.domain.alerts.rules.base import RUNBOOKS_PATH, workload_path
from watchtower.services.fairness_send import last_complete_week

from ..deps import ContainerDep
from ..status_sections import alerts_context, gpu_context, page_context

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
        # The same paths the alerts link to (domain.alerts.rules.base), so a page and an alert never differ.
        self.env.globals.update(workload_path=workload_path, runbooks_path=RUNBOOKS_PATH)

    def render(self, context: dict[str, object]) -> str:
        return self.render_page("status.html", context)

    def render_page(self, template: str, context: dict[str, object]) -> str:
        return self.env.get_template(template).render(**context)


def page_response(html: str, status_code: int = 200) -> HTMLResponse:
    """Return an HTML page with the headers every page of the service carries (CSP, no sniffing)."""
    return HTMLResponse(
        html,
        status_code=status_code,
        headers={
            "Content-Security-Policy": CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


@router.get("/", response_class=HTMLResponse)
async def status_page(request: Request, container: ContainerDep) -> HTMLResponse:
    # On the event loop, where alerting and GPU usage change their state: no half-updated reads.
    tracker = container.queue_tracker
    tick = tracker.latest
    docs = container.documents.for_tick(tick) if tick is not None else None
    ctx = page_context(
        tick=tick,
        docs=docs,
        readiness=tracker.readiness(),
        tiers=list(tracker.policy.tiers.tiers),
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
    ctx["fleet"] = bool(container.settings.fleet.clusters)
    # The newest complete ISO week: the one the weekly email is about.
    last_week = str(last_complete_week(now, container.settings.fairness.timezone))
    ctx["fairness_week"] = (
        last_week if container.report_source is not None and container.report_presenter is not None else ""
    )
    links = dict(container.links)
    if last_week in container.week_replays:
        links["replay of last week"] = container.week_replays[last_week]
    ctx["links"] = sorted(links.items())
    renderer: PageRenderer = request.app.state.pages
    return page_response(renderer.render(ctx))
