"""The ports: what the services need from the outside world, as Protocols the adapters implement.

Services receive these and never build an adapter; the composition root (watchtower.bootstrap) picks the
adapters and hands them in.

Size: over 400 lines: one short Protocol per thing the services need from outside, in one module so that
what an adapter must provide is read in one place; split by feature, the shared ones (the clock, the
stores) would sit apart from their users all the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from watchtower.domain.alerts.model import TrackedAlert
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import DeliveryResult, DisabledIntegration, OutboxMessage, PruneResult
from watchtower.domain.alerts.silences import Silence
from watchtower.domain.estimate_accuracy import GivenEstimate
from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode
from watchtower.domain.fairness.live import TeamNow
from watchtower.domain.fairness.mail import ReportMail
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.usage import UsageFigures
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.fleet import FleetRow
from watchtower.domain.gpu_usage import Sample
from watchtower.domain.health import SourceHealth
from watchtower.domain.leader import Leadership, LeaseRecord
from watchtower.domain.replay_record import NodeRecord, WorkloadRecord
from watchtower.replay.policy import NodeSpec
from watchtower.replay.trace import TraceJob


class Clock(Protocol):
    def now(self) -> float:
        """Return the current time, Unix epoch seconds."""
        ...


# ---- the cluster ----------------------------------------------------------------------------------------


# A sink for one decoded-or-not API change: (kind, "ADDED"|"MODIFIED"|"DELETED", raw object).
class ObjectSink(Protocol):
    def __call__(self, kind: str, event_type: str, raw: msgspec.Raw | bytes, /) -> None: ...


class ListSink(Protocol):
    """Takes a LIST of one kind (the initial list, or a re-list after 410 Gone) page by page as it arrives.

    `first` starts a list and `last` ends it: objects of the kind not given since `first` are gone. A
    page is applied when it arrives, so a 150,000-pod list is never held whole. A source that has the
    whole list at once (the simulator, a dump) makes one call and leaves both flags at their default.
    """

    def __call__(
        self, kind: str, items: Sequence[msgspec.Raw], *, first: bool = True, last: bool = True
    ) -> None: ...


class ClusterSource(Protocol):
    """Feeds API objects of every watched kind: the Kubernetes adapter or the simulator."""

    async def run(self, *, on_list: ListSink, on_change: ObjectSink) -> None:
        """List then watch until cancelled; reconnect by itself."""
        ...

    def feed_health(self) -> SourceHealth:
        """Return how fresh the picture is: overall and per kind."""
        ...


class DecodeError(ValueError):
    """An object that cannot be read; `uid` names it when that much could be read."""

    def __init__(self, message: str, *, kind: str = "", uid: str = "", name: str = "") -> None:
        super().__init__(message)
        self.kind, self.uid, self.name = kind, uid, name


class ObjectDecoder(Protocol):
    """Turns the API server's JSON bytes into domain records, reading only what Watchtower keeps.

    Each method raises DecodeError for an object it cannot read."""

    def head(self, raw: msgspec.Raw | bytes) -> tuple[str, str, str]:
        """Return an object's (kind, uid, name), as far as they can be read."""
        ...

    def decode_list(self, data: bytes) -> tuple[list[msgspec.Raw], str, str]:
        """Return a List's items, its resourceVersion and its continue token."""
        ...

    def decode(self, kind: str, raw: msgspec.Raw | bytes, /) -> Any:
        """Return the domain record of an object of a watched kind (domain/kinds.py), by its kind's
        name: each queue form's decoding says which record that is."""
        ...

    def decode_page(
        self, kind: str, items: Iterable[msgspec.Raw | bytes], on_error: Callable[[DecodeError], None], /
    ) -> Iterator[Any]:
        """Yield the record of each item of a LIST page of one kind; hand each unusable one to
        `on_error` and go on."""
        ...

    def type_of(self, raw: msgspec.Raw | bytes) -> tuple[str, str]:
        """Return an object's (kind, apiVersion): a dump names Volcano's PodGroup and upstream's alike."""
        ...


# ---- Prometheus -----------------------------------------------------------------------------------------


class FleetReader(Protocol):
    """The other clusters' Watchtowers, read at each visit of the fleet page; one row per cluster, in the
    configured order, a cluster that did not answer in time named as missing."""

    async def rows(self, tiers: Sequence[str]) -> list[FleetRow]: ...


class PromReadError(Exception):
    """Prometheus could not answer (down, timed out, refused the query): the figures are stale."""


class PromReader(Protocol):
    url: str

    async def query_many(self, queries: Sequence[str], *, at: float | None = None) -> list[list[Sample]]:
        """Return each query's instant vector at `at`; raise PromReadError when Prometheus cannot answer."""
        ...

    def close(self) -> None: ...


# ---- metrics of the service itself ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueGauges:
    """The queue's gauges at one evaluation, as plain numbers keyed by label values."""

    pending: Mapping[tuple[str, str, str], int] = field(default_factory=dict)  # tier, namespace, reason
    oldest_wait: Mapping[str, float] = field(default_factory=dict)  # tier
    partial_gangs: Mapping[str, int] = field(default_factory=dict)  # tier
    partial_gang_gpus: Mapping[str, int] = field(default_factory=dict)  # tier
    quota_used: Mapping[tuple[str, str], int] = field(default_factory=dict)  # namespace, resourcequota
    quota_hard: Mapping[tuple[str, str], int] = field(default_factory=dict)
    gated_pods: int = 0
    gated_workloads: Mapping[tuple[str, str], int] = field(default_factory=dict)  # tier, gate owner
    never_workloads: Mapping[tuple[str, str], int] = field(default_factory=dict)  # tier, never's reason
    fragmented_workloads: int = 0
    gpus_allocatable: int = 0
    gpus_used: int = 0
    evaluated_at: float | None = None
    # Per tier: workloads preempted at least the thrash count within the thrash window, and the most
    # preemptions one workload of the tier had within it.
    thrashing: Mapping[str, int] = field(default_factory=dict)
    most_preemptions: Mapping[str, int] = field(default_factory=dict)
    dra_unresolved: Mapping[str, int] = field(default_factory=dict)  # reason (dra.UNRESOLVED_REASONS)
    # Fairness now: GPUs waiting work still needs and the longest wait, per (team, tier); each team's
    # used / entitled / demand / fair share / satisfaction.
    waiting_gpus: Mapping[tuple[str, str], int] = field(default_factory=dict)
    team_oldest_wait: Mapping[tuple[str, str], float] = field(default_factory=dict)
    teams: Mapping[str, TeamNow] = field(default_factory=dict)


class QueueMetrics(Protocol):
    """What the watch loop records about the queue and itself (`/metrics`)."""

    def scheduled(self, tier: str, wait: float) -> None: ...
    def started(self, tier: str, latency: float) -> None: ...
    def preempted(self, victim_tier: str, preemptor_tier: str, gpu_hours_lost: float | None) -> None: ...
    def preempted_between_teams(
        self, victim_team: str, preemptor_team: str, gpu_hours_lost: float | None
    ) -> None: ...
    def preemptor_running(self, tier: str, latency: float) -> None: ...
    def preemption_judged(
        self, preemptor_tier: str, victim_tier: str, outcome: str, reason: str, gpu_hours_lost: float | None
    ) -> None: ...
    def preemption_unjudged(self, reason: str) -> None: ...
    def disrupted(self, reason: str, tier: str) -> None: ...
    def skipped_object(self, kind: str) -> None: ...
    def left_out(self, kind: str, reason: str) -> None: ...
    def evaluated(self, gauges: QueueGauges, duration: float) -> None: ...
    def consumer_failed(self, consumer: str) -> None: ...


# ---- alerting -------------------------------------------------------------------------------------------


class AlertStore(Protocol):
    """What alerting keeps across restarts: SQLiteAlertStore (one replica) and PostgresAlertStore (replicas
    sharing it) implement it. `due` hands each message it returns to one caller at a time: a store shared
    by replicas claims it until its outcome (`delivered`, `retry_at`, `failed`) or its claimer is gone."""

    def load_alerts(self) -> list[TrackedAlert]: ...
    def save_alerts(self, upsert: Iterable[TrackedAlert], delete: Iterable[str] = ()) -> None: ...
    def silences(self) -> list[Silence]: ...
    def put_silence(self, s: Silence) -> None: ...
    def nflog(self, integration: str, group_key: str) -> NotifyEntry | None: ...
    def nflogs(self, integration: str) -> dict[str, NotifyEntry]: ...
    def enqueue(self, items: Iterable[tuple[OutboxMessage | None, str, str, NotifyEntry]]) -> int: ...
    def due(self, now: float) -> list[OutboxMessage]: ...
    def next_attempt_at(self) -> float | None: ...
    def begin_attempt(self, msg_id: int, now: float) -> None: ...
    def delivered(self, msg_id: int, now: float) -> None: ...
    # A batched lane (owner notices): the due messages after its head, then one write per batch each way.
    def following(self, head: OutboxMessage, now: float, limit: int) -> list[OutboxMessage]: ...
    def begin_attempts(self, msg_ids: Sequence[int], now: float) -> None: ...
    def settle(self, delivered: Sequence[int], now: float, unattempted: Sequence[int] = ()) -> None: ...
    def retry_at(self, msg_id: int, when: float, error: str) -> None: ...
    def failed(self, msg_id: int, error: str) -> None: ...
    def disable(self, integration: str, reason: str, now: float, *, config: str = "") -> None: ...
    def enable(self, integration: str, now: float) -> bool: ...
    def disabled(self) -> dict[str, str]: ...
    def disabled_details(self) -> list[DisabledIntegration]: ...
    def depth(self) -> dict[str, int]: ...
    def oldest_pending(self) -> float | None: ...
    def messages(self, *, limit: int = 50, status: str | None = None) -> list[OutboxMessage]: ...
    def prune(self, now: float, *, silence_retention: float, delivered_retention: float) -> PruneResult: ...
    # The reports' once-per-key outbox (ReportOutbox): both stores keep the keys apart from the outbox rows.
    def recorded(self, keys: Iterable[str]) -> set[str]: ...
    def enqueue_once(self, messages: Iterable[OutboxMessage], now: float) -> int: ...
    def prune_keys(self, before: float) -> int: ...
    def close(self) -> None: ...


# ---- the fairness report --------------------------------------------------------------------------------


class FairnessHistory(Protocol):
    """The report's history in the state store. Recording is an upsert by each record's `key`, so a restart,
    a re-list or a second replica never counts a fact twice."""

    def record(
        self,
        episodes: Iterable[WaitEpisode] = (),
        preemptions: Iterable[PreemptionRecord] = (),
        incidents: Iterable[Incident] = (),
        *,
        heartbeats: Iterable[float] = (),  # minutes (Unix seconds, whole minutes) the service recorded
    ) -> None: ...
    def episodes(self, start: float, end: float) -> list[WaitEpisode]:
        """Episodes that overlap [start, end): started before `end` and not ended before `start`."""
        ...

    def preemptions(self, start: float, end: float) -> list[PreemptionRecord]: ...
    def incidents(self, start: float, end: float) -> list[Incident]: ...
    def history_coverage(self, start: float, end: float) -> float:
        """Hours within [start, end) the service was recording (from its own heartbeat rows)."""
        ...

    def prune_history(self, before: float) -> int: ...
    def open_waits(self) -> tuple[list[WaitEpisode], list[Incident]]:
        """Episodes and incidents not closed yet: where a restarted recorder starts from."""
        ...

    def close(self) -> None: ...


class ReplayRecords(Protocol):
    """What a replay of a recorded week reads from the state store (issue 31): the workloads that arrived in
    [start, end) as trace rows (`started` is the observed start, None if it never started) and the nodes the
    cluster had then. Recorded once per fact, like the history, so every replica writes the same rows."""

    def replay_jobs(self, start: float, end: float) -> Sequence[TraceJob]: ...
    def replay_nodes(self, start: float, end: float) -> Sequence[NodeSpec]:
        """The node inventory over [start, end): each node seen then, at the most GPUs it offered."""
        ...


class ReplayRecordStore(Protocol):
    """Where the replay recorder writes (services/replay_record.py): upserts that merge by key, so every
    replica may write the same facts (adapters/history/replay_rows.py)."""

    def record_replay(
        self, workloads: Iterable[WorkloadRecord] = (), nodes: Iterable[NodeRecord] = ()
    ) -> None: ...
    def replay_open(self) -> tuple[list[WorkloadRecord], list[NodeRecord]]:
        """The workloads not yet ended and every node: what a restarted recorder starts from."""
        ...

    def prune_replay(self, before: float) -> int: ...


class EstimateRecords(Protocol):
    """The start estimates given, in the state store (issue 33, adapters/history/estimate_rows.py): one row
    per wait, upserted by its key and merged by rule, so every replica may write the same waits."""

    def record_estimates(self, rows: Iterable[GivenEstimate]) -> None: ...
    def estimates_open(self) -> list[GivenEstimate]:
        """The estimates whose wait has not ended: what a restarted recorder starts from."""
        ...

    def estimates_started(self, start: float, end: float) -> list[GivenEstimate]:
        """The estimates whose work started in [start, end): the window the figures are read from."""
        ...

    def prune_estimates(self, before: float) -> int: ...


class EstimateMetrics(Protocol):
    """Where each checked start estimate is counted (`/metrics`)."""

    def estimate_checked(self, tier: str, relative_error: float) -> None: ...


class FairnessMetrics(Protocol):
    """The week's usage from Prometheus, aggregated on the server (sum_over_time, subqueries)."""

    async def week_usage(self, start: float, end: float, step: float) -> UsageFigures:
        """Raise PromReadError when Prometheus cannot answer at all; a missing series is a None figure."""
        ...


class ReportSource(Protocol):
    """The finished report of one ISO week, for one team or (None) all of them (the report service)."""

    def __call__(self, week: IsoWeek, team: str | None, /) -> Awaitable[FairnessReport] | FairnessReport: ...


class ReplayPresenter(Protocol):
    """Renders a replay's document (watchtower.services.replay) as a self-contained HTML page."""

    def page(self, doc: Mapping[str, Any], *, links: Sequence[tuple[str, str]] = ()) -> str: ...


class ReportPresenter(Protocol):
    """Renders a report for people: the page, the email, the text, the CSV, the charts."""

    def page(
        self,
        report: FairnessReport,
        *,
        teams: Sequence[str] | None = None,
        links: Sequence[tuple[str, str]] = (),
    ) -> str: ...
    def chart(self, report: FairnessReport, name: str) -> bytes | None:
        """Return one chart's PNG; None for a name that is no chart."""
        ...

    def text(
        self, report: FairnessReport, *, teams: Sequence[str] | None = None, footer: str = ""
    ) -> str: ...
    def csv(self, report: FairnessReport) -> str: ...
    def mail(
        self,
        report: FairnessReport,
        *,
        to: Sequence[str],
        teams: Sequence[str] | None,
        key: str,
        footer: str = "",
    ) -> ReportMail: ...


class ReportOutbox(Protocol):
    """Enqueues a message once per idempotency key, ever: the key is kept apart from the outbox row, so
    pruning delivered rows never makes a key new again."""

    def recorded(self, keys: Iterable[str]) -> set[str]:
        """Return those of `keys` already recorded."""
        ...

    def enqueue_once(self, messages: Iterable[OutboxMessage], now: float) -> int:
        """Record each message's key and enqueue it, in one transaction; skip a key already recorded.
        Return how many were enqueued."""
        ...

    def prune_keys(self, before: float) -> int: ...


class Sender(Protocol):
    """Delivers one outbox message to one integration (an email address list, a webhook URL)."""

    async def send(self, msg: OutboxMessage, *, now: float) -> DeliveryResult: ...


class MetricsExposition(Protocol):
    """The service's own metrics in the Prometheus text format, for `/metrics`."""

    content_type: str

    def render(self) -> bytes: ...


# ---- leadership -----------------------------------------------------------------------------------------


class LeaseApi(Protocol):
    """The one leader Lease, read and written by blocking calls (the Kubernetes adapter implements it)."""

    where: str  # "Lease <namespace>/<name>", for the logs

    def get(self) -> LeaseRecord | None:
        """Return the Lease; None when it does not exist."""
        ...

    def create(self, r: LeaseRecord) -> LeaseRecord:
        """Create it; raise domain.leader.LeaseConflict when it exists already."""
        ...

    def update(self, r: LeaseRecord) -> LeaseRecord:
        """Replace it if still at `r.resource_version`; raise LeaseConflict when it moved on."""
        ...


class Fence(Protocol):
    """Whether this process may act as the leader: what every leader-only side effect checks first."""

    def term(self) -> int | None:
        """Return the lease transition this process leads under now; None when it does not lead."""
        ...

    def holds(self, term: int) -> bool:
        """Return True when this process still leads under `term` and its lease has not run out by its
        own clock: checked right before each send."""
        ...

    def status(self) -> Leadership: ...
