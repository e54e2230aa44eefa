"""Policy replays through the service (docs/replay.md, "Through the service"): the request, the status
`ReplayJobs` keeps (`ReplayEntry.view()`), its result (the replay JSON of docs/json.md, built by
`services.replay.replay_document` from `replay.results.summarise`) and the refusals."""

from __future__ import annotations

from typing import Literal

from .common import Body, Number


class ReplayRequest(Body):
    """`POST /api/v1/replays`'s body."""

    trace: str
    """the trace's text: CSV with a header, or JSON lines"""
    policies: list[str]
    """the policies' texts (YAML or JSON), at most `replay.max_policies`; one without `name:` is `policy-1`,
    `policy-2`, ..."""


class WaitFigures(Body):
    mean: Number | None
    """mean wait, seconds; null when no job of the group ran"""
    p50: Number | None
    """median wait (nearest rank), seconds"""
    p95: Number | None
    """95th percentile wait (nearest rank), seconds"""
    p99: Number | None
    """99th percentile wait (nearest rank), seconds"""
    max: Number | None
    """longest wait, seconds"""


class _GroupFigures(Body):
    jobs: int
    """its jobs"""
    refused: int
    """of them refused"""
    never_started: int
    """of them still waiting when the run ended (a quota kept them out)"""
    wait_seconds: WaitFigures
    """the waits of the jobs that were not refused: all the time each was pending, every wait after a
    preemption included"""
    preemptions: int
    """times its jobs were preempted"""
    preempted_jobs: int
    """its jobs preempted at least once"""
    gpu_hours: Number
    """GPU-hours its jobs held"""
    gpu_hours_lost: Number
    """GPU-hours of their work redone"""
    attainment: Number | None
    """Σ GPUs·time held / Σ GPUs·(time held + wait); null when none of its jobs ran"""


class ReplayTier(_GroupFigures):
    """One tier's figures in a run."""

    tier: str
    """the tier's name"""


class ReplayTeam(_GroupFigures):
    """One team's figures in a run."""

    team: str
    """the team's name"""


class Refusal(Body):
    id: str
    """the job's id in the trace"""
    reason: str
    """why it could never run under the policy"""


class ReplayRun(Body):
    """The observed run, or one policy's replay."""

    name: str
    """`observed`, or the policy's `name` (`policy-1`, ... through the API when it has none)"""
    kind: Literal["observed", "replayed"]
    """`observed` (what the trace says happened) or `replayed`"""
    jobs: int
    """jobs in the run"""
    refused: int
    """jobs that could never run under the policy"""
    refusals: list[Refusal]
    """each refused job and why"""
    capacity_gpus: int
    """the policy's GPUs (the observed run: the first policy's)"""
    span_seconds: Number
    """first submission to last finish"""
    utilisation: Number | None
    """GPU-time held (termination graces included) / (span × capacity)"""
    preemptions: int
    """preemptions in the run"""
    gpu_hours_lost: Number
    """work redone after preemptions (restart mode, since the last checkpoint)"""
    jain_index: Number | None
    """Jain's index over the teams' `attainment`"""
    tiers: list[ReplayTier]
    """one group per tier, highest tier first"""
    teams: list[ReplayTeam]
    """one group per team, by name"""


class ReplayTrace(Body):
    jobs: int
    """the jobs replayed (rows asking GPUs)"""
    observed_jobs: int
    """those carrying an observed `started`"""
    skipped: dict[str, int]
    """the rows skipped, by reason (`{"no GPUs asked": 3}`)"""


class FidelityTier(Body):
    tier: str
    """the tier"""
    jobs: int
    """the tier's jobs compared"""
    observed: dict[str, Number | None]
    """the observed wait to the first start, seconds (nearest rank): its p50 and p95"""
    replayed: dict[str, Number | None]
    """the replayed wait to the first start of the same jobs, seconds: its p50 and p95"""


class Fidelity(Body):
    policy: str
    """the first policy, whose replay is compared"""
    jobs: int
    """jobs compared: an observed start, and a start in the replay"""
    left_out: dict[str, int]
    """the jobs not compared, by reason (`without an observed start`, `not started by the replay`)"""
    tiers: list[FidelityTier]
    """one per tier with a job compared, in the policy's tier order"""


class ReplayDocument(Body):
    """The replay JSON: what `watchtower replay --format json` prints for the same input."""

    schema_version: int
    """`1`"""
    trace: ReplayTrace
    """the trace's counts"""
    runs: list[ReplayRun]
    """the observed run first (when any job carries `started`), then one run per policy, in the order given"""
    fidelity: Fidelity | None = None
    """the first policy's replay beside what was observed, on the same jobs; absent without `started`"""


class ReplayLinks(Body):
    self: str
    """this status, `/api/v1/replays/{id}`"""
    page: str
    """its page, `/replays/{id}`"""


class ReplayStatus(Body):
    """`GET /api/v1/replays/{id}`: a replay's status, then its result; a part not there yet is null."""

    id: str
    """the replay's id"""
    status: Literal["queued", "running", "done", "failed"]
    """`queued`, `running`, `done` or `failed`"""
    rows: int
    """the trace's rows"""
    policies: list[str]
    """the policies' names, in the order given"""
    result: ReplayDocument | None
    """the replay JSON once `done`"""
    error: str | None
    """why it `failed`"""
    problems: list[str]
    """each problem of a failed replay (a trace row that cannot be replayed, named by its line and column)"""
    links: ReplayLinks
    """where to follow it"""


class ReplayAccepted(ReplayStatus):
    """`POST /api/v1/replays`' 202: the replay's status, and the time it is expected to take."""

    estimated_seconds: Number
    """the replay's expected run time, seconds"""


class RowsOverLimit(Body):
    """413: the trace has more rows than `replay.max_rows`."""

    error: str
    """what to do instead"""
    rows: int
    """the trace's rows"""
    max_rows: int
    """`replay.max_rows`"""
    estimated_seconds: Number
    """what the replay would have taken, seconds"""


class BytesOverLimit(Body):
    """413: the body's `Content-Length` is beyond any trace of `replay.max_rows` rows; it is not read."""

    error: str
    """what to do instead"""
    bytes: int
    """the body's `Content-Length`"""
    max_rows: int
    """`replay.max_rows`"""


class ReplayProblems(Body):
    """422: no replay request, or a policy that cannot be replayed."""

    error: str
    """what is wrong (the policy named by its place: `policies[0]: cannot replay`)"""
    problems: list[str]
    """each problem, by key (`preemptoin: Extra inputs are not permitted`)"""


class ReplayBusy(Body):
    """429: `replay.keep` replays are waiting or running already."""

    error: str
    """when to try again"""


class ReplayRefusal(Body):
    """A replay request refused before it runs (413, 422, 429)."""

    detail: RowsOverLimit | BytesOverLimit | ReplayProblems | ReplayBusy
    """what was wrong"""
