"""Policy replays through the service (docs/replay.md): `POST /api/v1/replays` (the API token) queues one,
`GET /api/v1/replays/{id}` gives its status and then its JSON (the document `watchtower replay --format json`
prints), `GET /replays/{id}` its page.

The replay runs in the container's `replays` pool, never on the event loop; the request is checked first
(its size against `replay.max_rows`, its policies' keys) and refused at once with what was wrong.

The JSON routes' answers are declared (schemas/replay.py) but not validated on the way out: the bytes
served are the views' own, and the request body is read by hand (`_body`) so that its size is checked before
it is read and a wrong one is answered with the problems, as a policy's are. The page stays out of
/openapi.json, as every HTML page does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse

from watchtower.services.replay_jobs import ReplayEntry, ReplayJobs, ReplayRefused, estimate_seconds

from ..container import Container
from ..deps import ContainerDep, TokenDep
from ..schemas import Problem, ReplayAccepted, ReplayRefusal, ReplayRequest, ReplayStatus
from .status_page import page_response

router = APIRouter(tags=["replays"])

BYTES_PER_ROW = 1024  # a trace's row is ~100 bytes; the policies' text rides in the same body


def _jobs(container: Container) -> ReplayJobs:
    if container.replays is None:
        raise HTTPException(status_code=404, detail="this service runs no replays")
    return container.replays


def _body(raw: bytes) -> tuple[str, list[str]]:
    """Return the trace and the policies of a request body; raise ReplayRefused(422) saying what is wrong."""

    def bad(problem: str) -> ReplayRefused:
        return ReplayRefused(422, {"error": "the body is not a replay request", "problems": [problem]})

    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise bad(f"(body): not JSON: {e}") from None
    if not isinstance(body, dict):
        raise bad('(body): a JSON object {"trace": "...", "policies": ["...", ...]} is expected')
    unknown = sorted(set(body) - {"trace", "policies"})
    if unknown:
        raise bad(f"{unknown[0]}: unknown key (keys: trace, policies)")
    trace, policies = body.get("trace"), body.get("policies")
    if not isinstance(trace, str) or not trace.strip():
        raise bad("trace: the trace's text (CSV with a header, or JSON lines) is required")
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        raise bad("policies: a list of policy texts (YAML or JSON) is required")
    return trace, policies


def _links(entry: ReplayEntry) -> dict[str, str]:
    return {"self": f"/api/v1/replays/{entry.id}", "page": f"/replays/{entry.id}"}


@router.post(
    "/api/v1/replays",
    status_code=202,
    dependencies=[TokenDep],
    response_model=ReplayAccepted,
    responses={
        404: {"model": Problem, "description": "this service runs no replays"},
        413: {"model": ReplayRefusal, "description": "the trace (or the body) is over `replay.max_rows`"},
        422: {
            "model": ReplayRefusal,
            "description": "no replay request, or a policy that cannot be replayed",
        },
        429: {"model": ReplayRefusal, "description": "`replay.keep` replays are waiting or running"},
    },
    # Declared here, not as a parameter: FastAPI would read the whole body before its size is checked, and
    # answer a wrong one with its own 422 rather than the problems.
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ReplayRequest.model_json_schema()}},
        }
    },
)
async def create_replay(request: Request, container: ContainerDep) -> Response:
    jobs = _jobs(container)
    # A body far beyond any trace of max_rows rows is refused before it is read into memory.
    most = jobs.cfg.max_rows * BYTES_PER_ROW
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > most:
        detail = {
            "error": f"the body is {int(length):,} bytes; a trace of at most {jobs.cfg.max_rows:,} rows "
            f"(replay.max_rows) is at most {most:,}: replay a shorter span, or run `watchtower replay` on it",
            "bytes": int(length),
            "max_rows": jobs.cfg.max_rows,
        }
        return JSONResponse({"detail": detail}, status_code=413)
    raw = await request.body()
    try:
        trace, policies = _body(raw)
        # Counting a large trace's rows and reading the policies takes a moment: off the loop too.
        entry = await asyncio.to_thread(jobs.submit, trace, policies)
    except ReplayRefused as e:
        return JSONResponse({"detail": e.detail}, status_code=e.status)
    body = {
        **entry.view(),
        "estimated_seconds": estimate_seconds(entry.rows, len(entry.policies)),
        "links": _links(entry),
    }
    return JSONResponse(body, status_code=202, headers={"Location": _links(entry)["self"]})


@router.get("/api/v1/replays/{replay_id}", response_model=ReplayStatus, responses={404: {"model": Problem}})
async def get_replay(replay_id: str, container: ContainerDep) -> Response:
    entry = _jobs(container).get(replay_id)
    if entry is None:
        raise HTTPException(
            status_code=404, detail=f"no replay {replay_id!r} (the service keeps the last ones)"
        )
    return Response(orjson.dumps({**entry.view(), "links": _links(entry)}), media_type="application/json")


def _note(title: str, text: str, *, refresh: bool) -> str:
    from html import escape

    meta = '<meta http-equiv="refresh" content="5">' if refresh else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{meta}<title>{escape(title)}</title>'
        f"</head><body><h1>{escape(title)}</h1><p>{escape(text)}</p></body></html>"
    )


@router.get("/replays/{replay_id}", response_class=HTMLResponse, include_in_schema=False)
async def replay_page(replay_id: str, container: ContainerDep) -> HTMLResponse:
    entry = _jobs(container).get(replay_id)
    if entry is None:
        return page_response(
            _note("No such replay", "The service keeps only its last replays.", refresh=False), 404
        )
    view = entry.view()
    doc = entry.result()
    if doc is None:
        if view["status"] in ("queued", "running"):
            text = f"The replay is {view['status']}; this page reloads every 5 seconds."
            return page_response(_note(f"Replay {view['status']}", text, refresh=True), 202)
        problems = "; ".join(view["problems"])
        return page_response(
            _note("The replay failed", f"{view['error'] or ''} {problems}".strip(), refresh=False), 422
        )
    presenter = container.replay_presenter
    if presenter is None:
        raise HTTPException(status_code=404, detail="this service renders no replay pages")
    links = [("JSON", f"/api/v1/replays/{replay_id}"), ("status page", "/")]
    html = await asyncio.to_thread(presenter.page, doc, links=links)
    return page_response(html)
