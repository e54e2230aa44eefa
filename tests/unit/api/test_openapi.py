"""/openapi.json describes the JSON the service returns, every field of it.

Two directions, so neither side can drift: each field the docs' tables list (docs/json.md, docs/api.md) is a
described property of the model /openapi.json gives for it, and no model has a property the docs do not list;
and what every route really returns, on the scenario cluster with alerting and GPU usage running, validates
against the model the route declares, unknown keys forbidden (a policy replay's too, run through the app).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tests.fixtures import FIXTURES, ROOT
from tests.fixtures.scenario import NOW, demo_cluster
from tests.unit.api.conftest import TOKEN, make_service
from tests.unit.api.routes.test_replays import finished
from tests.unit.commands.test_replay_cli import NO_PREEMPTION, PREEMPTION, TRACE
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.app import create_app
from watchtower.api.container import Container
from watchtower.api.deps import require_token
from watchtower.api.routes.alerts import build_router
from watchtower.api.schemas import Analysis
from watchtower.bootstrap import fairness_reports
from watchtower.config import Settings, settings_from_mapping
from watchtower.config.model import ReplayConfig
from watchtower.domain.gpu_usage import IdlePolicy, Sample
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.services.alerting import build_alerting
from watchtower.services.analyze import analysis_dict, analyze
from watchtower.services.gpu_usage import GpuUsageService
from watchtower.services.replay_jobs import ReplayJobs

DOCS = ROOT / "docs"
AT = datetime(2027, 1, 15, 10, tzinfo=UTC).timestamp()  # the fixtures' evaluation time
AUTH = {"authorization": f"Bearer {TOKEN}"}
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
# A replay with a value in every figure: job `f` is refused (larger than every node), so `critical` has only
# null figures, and the second policy preempts.
REPLAY = {
    "trace": TRACE + "f,vision,critical,2026-11-30T09:00:00Z,,1h,1,16\n",
    "policies": [NO_PREEMPTION, "name: preempting\n" + PREEMPTION],
}

# (doc, section heading) → (model, base): the model's properties are the table's fields plus the base's.
TABLES: dict[tuple[str, str], tuple[str, str | None]] = {
    ("json.md", "workloads"): ("Workload", None),
    ("json.md", "preemptions"): ("Preemption", None),
    ("json.md", "fairness report"): ("FairnessReport", None),
    ("json.md", "fairness report: cluster"): ("ClusterFigures", None),
    ("json.md", "fairness report: teams"): ("TeamFigures", None),
    ("json.md", "fairness report: method"): ("Method", None),
    ("json.md", "fairness report: what if"): ("FairnessWhatIf", None),
    ("json.md", "fairness history"): ("FairnessHistory", None),
    ("json.md", "replay"): ("ReplayDocument", None),
    ("json.md", "replay: run"): ("ReplayRun", None),
    ("json.md", "replay: fidelity"): ("Fidelity", None),
    ("json.md", "replay: fidelity tier"): ("FidelityTier", None),
    ("api.md", "`GET /api/v1/queue`"): ("Queue", None),
    ("api.md", "`GET /api/v1/workloads/{namespace}/{name}`"): ("WorkloadDetail", None),
    ("api.md", "`GET /api/v1/preemptions`"): ("Preemptions", None),
    ("api.md", "`GET /healthz`"): ("Health", None),
    ("api.md", "`GET /readyz`"): ("Readiness", None),
    ("api.md", "`GET /api/v1/gpu/idle`"): ("IdleGpuReport", None),
    ("api.md", "idle workload"): ("IdleWorkload", None),
    ("api.md", "idle while waiting"): ("IdleWhileWaiting", "IdleWorkload"),
    ("api.md", "`GET /api/v1/fleet`"): ("Fleet", None),
    ("api.md", "fleet cluster"): ("FleetCluster", None),
    ("api.md", "fleet tier"): ("FleetTier", None),
    ("api.md", "`GET /api/v1/alerts`"): ("Alert", None),
    ("api.md", "`GET /api/v1/silences`"): ("Silence", None),
    ("api.md", "`POST /api/v1/silences`"): ("CreatedSilence", "Silence"),
    ("api.md", "`GET /api/v1/receivers`"): ("Receiver", None),
    ("api.md", "`POST /api/v1/receivers/{name}/enable`"): ("EnabledReceiver", "Receiver"),
    ("api.md", "`GET /api/v1/replays/{id}`"): ("ReplayStatus", None),
    ("api.md", "`POST /api/v1/replays`"): ("ReplayAccepted", "ReplayStatus"),
    ("api.md", "replay refusals"): ("ReplayRefusal", None),
    ("api.md", "Errors"): ("Problem", None),
}
# A table of two models told apart by their first field (`tier` or `team`): each has its own and the rest.
EITHER: dict[tuple[str, str], dict[str, str]] = {
    ("json.md", "replay: tier or team"): {"tier": "ReplayTier", "team": "ReplayTeam"},
}
# The analyze document, which no route serves: its models' JSON schema, checked the same way.
ANALYZE_TABLES: dict[str, str] = {
    "Top level": "Analysis",
    "workloads": "Workload",
    "preemptions": "Preemption",
    "disruptions": "Disruption",
    "fragmentation": "Fragmentation",
}
NOT_OURS = {"HTTPValidationError", "ValidationError", "MatcherIn", "SilenceIn"}  # FastAPI's; request bodies
NOT_JSON = {"/", "/metrics", "/openapi.json"}


# ---- the docs' tables ---------------------------------------------------------------------------------


def field_tables(doc: str) -> dict[str, dict[str, str]]:
    """Return heading → field → meaning for each `| field | type | meaning |` table of a Markdown file."""
    tables: dict[str, dict[str, str]] = {}
    heading = ""
    in_table = False
    for line in (DOCS / doc).read_text().splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("| field |"):
            in_table = True
            tables[heading] = {}
        elif in_table and line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set(cells[0]) <= {"-"}:
                continue
            for name in re.findall(r"`([a-zA-Z0-9_]+)`", cells[0]):
                tables[heading][name] = cells[-1]
        else:
            in_table = False
    return tables


def brace_sets(meaning: str) -> list[set[str]]:
    """Return the field sets a meaning spells out as `{a, b, c}` (the fields of a nested object)."""
    return [{f.strip() for f in m.split(",")} for m in re.findall(r"`\{([a-zA-Z0-9_, ]+)\}`", meaning)]


# ---- the schemas --------------------------------------------------------------------------------------


def refs(schema: Any) -> Iterator[str]:
    """Yield the names of the models a (property) schema refers to, through lists, maps and nullables."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[1]
        for v in schema.values():
            yield from refs(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from refs(v)


def nested(models: dict[str, Any], name: str) -> set[str]:
    """Return the model `name` and every model reachable from it."""
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(refs(models[n]))
    return seen


def properties(models: dict[str, Any], name: str) -> set[str]:
    return set(models[name].get("properties", {}))


def check_table(
    models: dict[str, Any], fields: dict[str, str], model: str, base: str | None = None
) -> set[str]:
    """Assert the model has exactly the table's fields (plus its base's), each described, and that each
    `{...}` in a meaning is the field set of a model under that field; return the models so documented."""
    expected = set(fields) | (properties(models, base) if base else set())
    props = models[model]["properties"]
    assert set(props) - expected == set(), f"{model}: modelled but not documented"
    assert expected - set(props) == set(), f"{model}: documented but not modelled"
    undescribed = sorted(f for f in fields if not props[f].get("description"))
    assert undescribed == [], f"{model}: no description in /openapi.json"
    covered = {model}
    for field, meaning in fields.items():
        under = {m for r in refs(props[field]) for m in nested(models, r)}
        for wanted in brace_sets(meaning):
            found = [m for m in sorted(under) if properties(models, m) == wanted]
            assert found, (
                f"{model}.{field}: no model with the fields {sorted(wanted)} (under {sorted(under)})"
            )
            covered.add(found[0])
    return covered


def object_models(models: dict[str, Any]) -> set[str]:
    return {n for n, s in models.items() if "properties" in s and n not in NOT_OURS}


# ---- the service, with alerting and GPU usage --------------------------------------------------------


class ScenarioPrometheus:
    """Answers the GPU-usage queries from the scenario's running pods: the `vision` pods idle, others busy."""

    url = "http://prometheus.test:9090"

    def __init__(self, state: Any) -> None:
        self.state = state

    async def query_many(self, queries: Any, *, at: float | None = None) -> list[list[Sample]]:
        util, seen, gpus, owners = [], [], [], []
        for p in self.state.pods.values():
            if p.phase != "Running" or not p.gpus or not p.node:
                continue
            pod = {"namespace": p.namespace, "pod": p.name}
            for i in range(p.gpus):
                device = {"Hostname": p.node, "UUID": f"GPU-{p.name}-{i}", **pod}
                util.append(Sample(device, 1.0 if p.namespace == "vision" else 80.0))
                seen.append(Sample(device, (at or 0.0) - 86400.0))  # there all window, and long before
            gpus.append(Sample(pod, float(p.gpus)))
            if p.owner is not None:
                owners.append(Sample({**pod, "owner_kind": p.owner.kind, "owner_name": p.owner.name}, 1.0))
        return [util, util, seen, gpus, owners, []]


def scenario_gpu(c: Container) -> GpuUsageService:
    """Return the GPU-usage service of container `c` reading ScenarioPrometheus, as the composition root
    builds it."""
    return GpuUsageService(
        reader=ScenarioPrometheus(c.queue_tracker.state),
        queries=ExporterQueries(),
        policy=IdlePolicy(),
        tiers=c.settings.tier_policy(),
        team_of=c.queue_tracker.state.team_of,
        holders_included=True,
    )


@pytest.fixture
async def full(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    svc = make_service()
    c = svc.container
    settings = settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": "hook", "group_by": ["alertname"]},
                "receivers": [{"name": "hook", "webhooks": [{"url": "http://hook.test/", "secret": SECRET}]}],
            }
        },
        env={},
    )
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    alerting = build_alerting(settings=settings, store=store)
    tick = c.queue_tracker.latest
    await alerting.on_tick(tick)
    store.disable("hook/webhook/0", "410 Gone at hook/webhook/0", NOW)
    gpu = scenario_gpu(c)
    # As the runtime's TickLoop does: read, name the idle holders, evaluate with their statuses.
    await gpu.refresh(NOW)
    tick = c.queue_tracker.evaluate(NOW, holders_of=gpu.idle_holders())
    await gpu.on_snapshot(tick.snapshot_with_holders(), NOW)
    history = SQLiteFairnessHistory(tmp_path / "alerts.db")
    # Threads, not the service's spawned processes: the pool is not what these tests check.
    replays = ReplayJobs(ReplayConfig(max_rows=50), pool=lambda n: ThreadPoolExecutor(max_workers=n))
    container = dataclasses.replace(
        c,
        alerting=alerting,
        alert_store=store,
        gpu=gpu,
        fairness=fairness_reports(c.settings, history, c.queue_tracker),
        replays=replays,
    )
    app = create_app(
        container, routers=[build_router(alerting.admin, require_token=require_token, clock=svc.clock)]
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://watchtower.test"
    ) as cl:
        yield cl
    replays.close()
    store.close()
    history.close()


def operation(spec: dict[str, Any], method: str, url: str) -> tuple[str, dict[str, Any]]:
    """Return the path template and the operation /openapi.json gives for this method and URL."""
    for path, ops in spec["paths"].items():
        if method in ops and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", path), url):
            return path, ops[method]
    raise AssertionError(f"/openapi.json has no {method.upper()} {url}")


def check_response(spec: dict[str, Any], r: httpx.Response) -> Any:
    """Validate a response against the schema /openapi.json declares for its route and status (the models'
    schemas forbid keys they do not declare); return its JSON."""
    path, op = operation(spec, r.request.method.lower(), r.request.url.path)
    declared = op["responses"].get(str(r.status_code), {}).get("content", {}).get("application/json")
    assert declared is not None, f"{r.request.method} {path} declares no JSON body for {r.status_code}"
    schema = {**declared["schema"], "components": spec["components"]}
    body = r.json()
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(body)
    return body


# ---- the tests ----------------------------------------------------------------------------------------


async def test_openapi_has_a_described_property_for_every_documented_field(full: httpx.AsyncClient) -> None:
    spec = (await full.get("/openapi.json")).json()
    models = spec["components"]["schemas"]
    docs = {doc: field_tables(doc) for doc in ("json.md", "api.md")}
    covered: set[str] = set()
    for (doc, section), (model, base) in TABLES.items():
        assert section in docs[doc], f"{doc} has no table under {section!r}"
        covered |= check_table(models, docs[doc][section], model, base)
    for (doc, section), by_field in EITHER.items():
        assert section in docs[doc], f"{doc} has no table under {section!r}"
        for own, model in by_field.items():
            fields = {f: m for f, m in docs[doc][section].items() if f == own or f not in by_field}
            covered |= check_table(models, fields, model)
    # Every model a route answers with is described by some table, and nothing in the docs is left over.
    assert object_models(models) - covered == set()
    assert {s for s in docs["api.md"] if s} == {s for d, s in TABLES if d == "api.md"}

    def answers(path: str, method: str = "get", status: str = "200") -> set[str]:
        return set(refs(spec["paths"][path][method]["responses"][status]))

    assert answers("/api/v1/queue") == {"Queue"} and "Workload" in nested(models, "Queue")
    assert answers("/api/v1/workloads/{namespace}/{name}") == {"WorkloadDetail"}
    assert answers("/api/v1/preemptions") == {"Preemptions"}
    assert answers("/api/v1/alerts") == {"Alert"}
    assert answers("/api/v1/gpu/idle") == {"IdleGpuReport"}
    assert answers("/api/v1/fleet") == {"Fleet"}
    assert answers("/api/v1/reports/fairness") == {"FairnessReport"}
    assert answers("/api/v1/replays", "post", "202") == {"ReplayAccepted"}
    assert answers("/api/v1/replays/{replay_id}") == {"ReplayStatus"}
    assert "ReplayDocument" in nested(models, "ReplayStatus")


def test_the_analyze_document_model_has_every_field_json_md_lists() -> None:
    schema = Analysis.model_json_schema()
    models = {**schema.pop("$defs"), "Analysis": schema}
    tables = field_tables("json.md")
    covered: set[str] = set()
    for section, model in ANALYZE_TABLES.items():
        covered |= check_table(models, tables[section], model)
    assert {"NodeCapacity", "NamespaceQuota", "TierLatency", "Distribution", "RuleAlert"} <= covered


async def test_every_model_forbids_keys_it_does_not_declare_and_describes_the_ones_it_does(
    full: httpx.AsyncClient,
) -> None:
    spec = (await full.get("/openapi.json")).json()
    models = Analysis.model_json_schema()["$defs"] | spec["components"]["schemas"]
    loose = sorted(n for n in object_models(models) if models[n].get("additionalProperties") is not False)
    assert loose == []
    undescribed = sorted(
        f"{n}.{f}"
        for n in object_models(models)
        for f, p in models[n]["properties"].items()
        if not p.get("description")
    )
    assert undescribed == []


async def test_every_get_route_answers_with_what_openapi_json_declares(full: httpx.AsyncClient) -> None:
    spec = (await full.get("/openapi.json")).json()
    silence = {
        "matchers": [{"name": "tier", "value": "critical"}],
        "endsAt": "2030-01-01T00:00:00Z",
        "createdBy": "oncall",
        "comment": "known",
    }
    r = await full.post("/api/v1/silences", json=silence, headers=AUTH)
    assert r.status_code == 201, r.text
    sid = check_response(spec, r)["silenceID"]
    r = await full.post("/api/v1/replays", json=REPLAY, headers=AUTH)
    assert r.status_code == 202, r.text
    replay_id = check_response(spec, r)["id"]
    bad_row = {**REPLAY, "trace": TRACE.replace("nlp,medium", "nlp,urgent")}
    r = await full.post("/api/v1/replays", json=bad_row, headers=AUTH)
    assert r.status_code == 202, r.text
    failed_id = check_response(spec, r)["id"]
    assert (await finished(full, replay_id))["status"] == "done"
    assert (await finished(full, failed_id))["status"] == "failed"
    gets = [
        "/healthz",
        "/readyz",
        "/api/v1/queue?limit=1000",
        "/api/v1/queue?state=quota_blocked",
        "/api/v1/workloads/ops/debug-1",  # waiting
        "/api/v1/workloads/vision/resnet",  # running: worked out for the request
        "/api/v1/workloads/vision/old-batch-0",  # preempted
        "/api/v1/preemptions",
        "/api/v1/gpu/idle",
        "/api/v1/alerts",
        "/api/v1/silences",
        "/api/v1/receivers",
        "/api/v1/reports/fairness?team=vision",
        f"/api/v1/replays/{replay_id}",  # done: its result
        f"/api/v1/replays/{failed_id}",  # failed: a trace row
        "/api/v1/fleet",
    ]
    bodies = {}
    for url in gets:
        r = await full.get(url)
        assert r.status_code == 200, (url, r.text)
        bodies[url] = check_response(spec, r)
    # Behind the token, unlike the other GETs: another Watchtower's fleet report reads it.
    history = "/api/v1/fairness/history?week=2027-W01"
    r = await full.get(history, headers=AUTH)
    assert r.status_code == 200, r.text
    bodies[history] = check_response(spec, r)
    served = {path for path, ops in spec["paths"].items() if "get" in ops}
    asked = {operation(spec, "get", url.split("?")[0])[0] for url in [*gets, history]}
    assert served - NOT_JSON - asked == set(), "GET routes this test does not ask"

    # The nested models were checked against values, not only nulls and empty lists.
    assert any(w["quota"] for w in bodies["/api/v1/queue?state=quota_blocked"]["workloads"])
    assert any(w["reasons"] for w in bodies["/api/v1/queue?limit=1000"]["workloads"])
    assert bodies["/api/v1/workloads/vision/old-batch-0"]["preemptions"][0]["victim_workload"]
    assert all(k.get("source") for k in bodies["/readyz"]["kinds"].values())
    assert bodies["/api/v1/gpu/idle"]["idle_while_waiting"]
    alerts = bodies["/api/v1/alerts"]
    assert any(a["silencedBy"] for a in alerts) and any(a["inhibitedBy"] for a in alerts)
    assert bodies["/api/v1/receivers"][0]["integrations"][0]["disabledAt"]
    runs = bodies[f"/api/v1/replays/{replay_id}"]["result"]["runs"]
    assert [r["kind"] for r in runs] == ["observed", "replayed", "replayed"]
    assert runs[-1]["refusals"] and runs[-1]["preemptions"] and runs[-1]["tiers"][1]["wait_seconds"]["p50"]
    assert runs[-1]["tiers"][0]["wait_seconds"]["p50"] is None  # `critical`: its one job refused
    assert bodies[f"/api/v1/replays/{failed_id}"]["problems"]

    many_rows = "id,team,tier,submitted,duration,pods,gpus_per_pod\n" + "j,nlp,low,0,10m,1,1\n" * 60
    for r, status in (
        (await full.post("/api/v1/replays", json={**REPLAY, "trace": many_rows}, headers=AUTH), 413),
        (await full.post("/api/v1/replays", json={"trace": "x" * 60 * 1024}, headers=AUTH), 413),
        (await full.post("/api/v1/replays", json={"trace": TRACE}, headers=AUTH), 422),
        (
            await full.post("/api/v1/replays", json={**REPLAY, "policies": ["preemptoin: {}"]}, headers=AUTH),
            422,
        ),
        (await full.get("/api/v1/replays/nothing"), 404),
    ):
        assert r.status_code == status, r.text
        check_response(spec, r)

    for r in (
        await full.post("/api/v1/receivers/hook/enable", headers=AUTH),
        await full.delete(f"/api/v1/silences/{sid}", headers=AUTH),
        await full.get("/api/v1/workloads/ops/nothing-here"),
        await full.get("/api/v1/queue", params={"tier": "urgent"}),
    ):
        check_response(spec, r)


async def test_readyz_answers_503_with_the_body_openapi_json_declares_while_the_cluster_is_listed() -> None:
    svc = make_service(listed=False, evaluate=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=svc.app), base_url="http://w.test") as c:
        spec = (await c.get("/openapi.json")).json()
        r = await c.get("/readyz")
    assert r.status_code == 503
    assert check_response(spec, r)["problems"]


@pytest.mark.parametrize("dump", ["cluster.json", "malformed.json", "scenario"])
def test_the_analyze_document_validates_against_its_model(dump: str) -> None:
    settings = Settings()
    data = demo_cluster().dump() if dump == "scenario" else (FIXTURES / dump).read_bytes()
    decoder = ObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
    )
    result = analyze(
        data, policy=settings.queue_policy(), decoder=decoder, at=NOW if dump == "scenario" else AT
    )
    Analysis.model_validate(analysis_dict(result, settings.queue_policy(), settings))
