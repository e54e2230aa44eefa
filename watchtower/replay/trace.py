"""The trace a replay runs: one row per job, as CSV with a header or as JSON lines with the same keys.

The parser is pure: the caller opens the file and hands over its lines (a file object is an iterable of lines,
so a trace is never read whole before the row cap can refuse it). Every malformed row raises `TraceError`
naming its line and column; the rows a replay has nothing to do with (no GPUs asked) are skipped and counted.

Columns (docs/replay.md has the table):
  id, team                        required
  tier | priority_class | priority at least one; the tier is resolved as the service resolves a pod's
  submitted                       ISO 8601 (no zone: UTC) or epoch seconds
  started                         optional, the start observed
  duration | finished             run time (30s, 2h, 1h30m or seconds), or the end (run time = finished - started)
  pods, gpus_per_pod              pods of the job and GPUs each asks
  cpu_per_pod, memory_per_pod     optional: Kubernetes quantities (500m, 2; 16Gi, 512M) or plain numbers
  gang_min                        optional: fewest pods that must run together (1..pods); default: pods
  preemptible                     optional: true/false; false: never a victim
  grace                           optional: how long its pods take to stop when preempted (at most their
                                  terminationGracePeriodSeconds); default: the policy's termination_grace
  deleted                         optional: when it was deleted, if it never started: it leaves the queue then
  controller                      optional: true/false; false: bare pods (no controller makes them again),
                                  which a quota refusing them at creation turns away for good

Size: just over 400 lines, most of it the per-column readers and their error words, one per column above.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from watchtower.config.durations import parse_duration
from watchtower.domain.tiers import TierPolicy

MAX_ROWS = 1_000_000  # a week of a busy cluster is ~10^4..10^5 jobs; 10^7 rows would need gigabytes
REQUIRED = ("id", "team", "submitted", "pods", "gpus_per_pod")
COLUMNS = (
    "id",
    "team",
    "tier",
    "priority_class",
    "priority",
    "submitted",
    "started",
    "duration",
    "finished",
    "pods",
    "gpus_per_pod",
    "cpu_per_pod",
    "memory_per_pod",
    "gang_min",
    "preemptible",
    "grace",
    "deleted",
    "controller",
)


class TraceError(ValueError):
    """A trace that cannot be replayed; the message names the line and the column."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: str
    team: str
    tier: str
    priority: int
    submitted: float  # epoch seconds
    duration: float  # seconds of run time the job needs
    pods: int
    gpus_per_pod: int
    started: float | None = None  # observed start, when the trace has one
    cpu_millis_per_pod: int | None = None
    memory_bytes_per_pod: int | None = None
    gang_min: int | None = None
    preemptible: bool = True
    grace: float | None = None  # seconds its pods take to stop when preempted; None: the policy's
    deleted: float | None = None  # when it was deleted before it ever started (epoch seconds)
    # Whether a controller makes its pods (a Job, a ReplicaSet, an operator), retrying those a quota refuses;
    # False: bare pods, which a quota refusing them at creation turns away for good.
    controller: bool = True

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[TraceJob, ...]  # in submission order (ties: the order of the rows)
    skipped: Mapping[str, int]  # reason -> rows skipped for it


_TRUE = {"true", "yes", "1", "y", "t"}
_FALSE = {"false", "no", "0", "n", "f"}
_MEM = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)([a-zA-Z]*)$")


def parse_csv(lines: str | Iterable[str], tiers: TierPolicy, *, max_rows: int = MAX_ROWS) -> Trace:
    """Return the jobs of a CSV trace (a header row naming the columns, in any order, then one row per job)."""
    it = iter(lines.splitlines() if isinstance(lines, str) else lines)
    reader = csv.reader(it)
    header = next(reader, None)
    if header is None:
        raise TraceError("line 1: the trace is empty; the first line names the columns")
    names = [h.strip() for h in header]
    names[0] = names[0].removeprefix("\ufeff")  # the byte-order mark spreadsheets put before the first column
    _check_header(names)

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(names):
                raise TraceError(
                    f"line {line}: {len(cells)} cells where the header names {len(names)} columns"
                )
            yield line, dict(zip(names, cells, strict=True))

    return _parse(rows(), tiers, max_rows)


def parse_jsonl(lines: str | Iterable[str], tiers: TierPolicy, *, max_rows: int = MAX_ROWS) -> Trace:
    """Return the jobs of a JSON-lines trace: one object per line with the CSV's column names as keys."""
    it = lines.splitlines() if isinstance(lines, str) else lines

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        for line, text in enumerate(it, start=1):
            if not text.strip():
                continue
            try:
                obj = orjson.loads(text)
            except orjson.JSONDecodeError as e:
                raise TraceError(f"line {line}: not JSON: {e}") from None
            if not isinstance(obj, dict):
                raise TraceError(f"line {line}: a JSON object is expected, not {type(obj).__name__}")
            unknown = sorted(set(obj) - set(COLUMNS))
            if unknown:
                raise TraceError(
                    f"line {line}, column {unknown[0]}: unknown column (known: {', '.join(COLUMNS)})"
                )
            yield line, obj

    return _parse(rows(), tiers, max_rows)


def format_csv(jobs: Iterable[TraceJob]) -> Iterator[str]:
    """Yield a CSV trace of `jobs`, one line each after the header (each line ends with a newline), that
    parse_csv reads back to the same jobs: times in epoch seconds, the tier and the priority value both."""
    yield ",".join(COLUMNS) + "\n"
    for j in jobs:
        row = _row(j)
        yield ",".join(_csv_cell(row[c]) for c in COLUMNS) + "\n"


def format_jsonl(jobs: Iterable[TraceJob]) -> Iterator[str]:
    """Yield a JSON-lines trace of `jobs` (one object per line, unset columns left out) that parse_jsonl reads
    back to the same jobs."""
    for j in jobs:
        yield orjson.dumps({k: v for k, v in _row(j).items() if v is not None}).decode() + "\n"


def _row(j: TraceJob) -> dict[str, Any]:
    return {
        "id": j.id,
        "team": j.team,
        "tier": j.tier,
        "priority_class": None,
        "priority": j.priority,
        "submitted": j.submitted,
        "started": j.started,
        "duration": j.duration,
        "finished": None,
        "pods": j.pods,
        "gpus_per_pod": j.gpus_per_pod,
        "cpu_per_pod": f"{j.cpu_millis_per_pod}m" if j.cpu_millis_per_pod is not None else None,
        "memory_per_pod": j.memory_bytes_per_pod,
        "gang_min": j.gang_min,
        "preemptible": j.preemptible,
        "grace": j.grace,
        "deleted": j.deleted,
        "controller": j.controller,
    }


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)  # the shortest text that reads back to the same float
    text = str(v)
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _check_header(names: list[str]) -> None:
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise TraceError(f"line 1, column {unknown[0]}: unknown column (known: {', '.join(COLUMNS)})")
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise TraceError(f"line 1: missing column {missing[0]} (required: {', '.join(REQUIRED)})")
    if not {"tier", "priority_class", "priority"} & set(names):
        raise TraceError("line 1: missing column tier (or priority_class, or priority)")
    if not {"duration", "finished"} & set(names):
        raise TraceError("line 1: missing column duration (or finished)")


def _parse(rows: Iterator[tuple[int, dict[str, Any]]], tiers: TierPolicy, max_rows: int) -> Trace:
    jobs: list[TraceJob] = []
    skipped: dict[str, int] = {}
    seen: dict[str, int] = {}
    for count, (line, row) in enumerate(rows, start=1):
        if count > max_rows:
            raise TraceError(
                f"line {line}: the trace has more than {max_rows:,} rows; replay a shorter span "
                "(a week is usually well under that) or split the trace"
            )
        job = _job(line, row, tiers)
        if job is None:
            skipped["no GPUs asked"] = skipped.get("no GPUs asked", 0) + 1
            continue
        if job.id in seen:
            raise TraceError(f"line {line}, column id: {job.id!r} is already the id of line {seen[job.id]}")
        seen[job.id] = line
        jobs.append(job)
    jobs.sort(key=lambda j: j.submitted)  # stable: rows submitted together keep their order
    return Trace(tuple(jobs), skipped)


def _cell(row: Mapping[str, Any], name: str) -> Any:
    v = row.get(name)
    if isinstance(v, str):
        v = v.strip()
        return v or None
    return v


def _job(line: int, row: Mapping[str, Any], tiers: TierPolicy) -> TraceJob | None:
    def bad(column: str, what: str) -> TraceError:
        return TraceError(f"line {line}, column {column}: {what}")

    def required(name: str) -> Any:
        v = _cell(row, name)
        if v is None:
            raise bad(name, "missing value")
        return v

    def count(name: str, lo: int) -> int | None:
        v = _cell(row, name)
        if v is None:
            return None
        n = _integer(v)
        if n is None:
            raise bad(name, f"{v!r} is not a whole number")
        if n < lo:
            raise bad(name, f"{n} is below {lo}")
        return n

    def instant(name: str) -> float | None:
        v = _cell(row, name)
        if v is None:
            return None
        t = _timestamp(v)
        if t is None:
            raise bad(name, f"{v!r} is neither an ISO 8601 time nor epoch seconds")
        return t

    job_id, team = str(required("id")), str(required("team"))
    pods = count("pods", 1)
    gpus_per_pod = count("gpus_per_pod", 0)
    if pods is None:
        raise bad("pods", "missing value")
    if gpus_per_pod is None:
        raise bad("gpus_per_pod", "missing value")

    tier_name, priority = _tier(row, tiers, bad)
    submitted = instant("submitted")
    if submitted is None:
        raise bad("submitted", "missing value")
    started, finished = instant("started"), instant("finished")
    if started is not None and started < submitted:
        raise bad("started", "before submitted")
    raw_duration = _cell(row, "duration")
    if raw_duration is not None:
        duration = _seconds(raw_duration)
        if duration is None:
            raise bad("duration", f"{raw_duration!r} is not a duration (30s, 2h, 1h30m or seconds)")
        if duration < 0:
            raise bad("duration", f"negative duration {duration:g}s")
    elif finished is not None:
        if started is None:
            raise bad("finished", "without started the run time is unknown: give started or duration")
        duration = finished - started
        if duration < 0:
            raise bad("finished", f"before started: a negative duration of {duration:g}s")
    else:
        raise bad("duration", "missing value (give duration, or started and finished)")

    gang_min = count("gang_min", 1)
    if gang_min is not None and gang_min > pods:
        raise bad("gang_min", f"{gang_min} is more than the job's {pods} pods")
    preemptible, controller = _flag(row, "preemptible", bad), _flag(row, "controller", bad)
    grace = None
    if (raw_grace := _cell(row, "grace")) is not None:
        grace = _seconds(raw_grace)
        if grace is None or grace < 0:
            raise bad("grace", f"{raw_grace!r} is not a duration of zero or more (30s, 10m or seconds)")
    try:
        cpu = _quantity(_cell(row, "cpu_per_pod"), cpu=True)
    except ValueError:
        raise bad("cpu_per_pod", f"{_cell(row, 'cpu_per_pod')!r} is not a CPU quantity (500m, 2)") from None
    try:
        memory = _quantity(_cell(row, "memory_per_pod"), cpu=False)
    except ValueError:
        raise bad(
            "memory_per_pod", f"{_cell(row, 'memory_per_pod')!r} is not a memory quantity (16Gi, 512M)"
        ) from None

    if gpus_per_pod == 0:
        return None
    return TraceJob(
        id=job_id,
        team=team,
        tier=tier_name,
        priority=priority,
        submitted=submitted,
        duration=duration,
        pods=pods,
        gpus_per_pod=gpus_per_pod,
        started=started,
        cpu_millis_per_pod=cpu,
        memory_bytes_per_pod=memory,
        gang_min=gang_min,
        preemptible=preemptible,
        grace=grace,
        deleted=instant("deleted"),
        controller=controller,
    )


def _flag(row: Mapping[str, Any], column: str, bad: Any) -> bool:
    """Return a true/false column's value; unset: true."""
    if (p := _cell(row, column)) is None:
        return True
    if isinstance(p, bool):
        return p
    if str(p).lower() in _TRUE | _FALSE:
        return str(p).lower() in _TRUE
    raise bad(column, f"{p!r} is neither true nor false")


def _tier(row: Mapping[str, Any], tiers: TierPolicy, bad: Any) -> tuple[str, int]:
    """Return (tier name, priority): a named tier wins; else the PriorityClass, else the value, decide it."""
    name, cls, raw = _cell(row, "tier"), _cell(row, "priority_class"), _cell(row, "priority")
    priority: int | None = None
    if raw is not None:
        priority = _integer(raw)
        if priority is None:
            raise bad("priority", f"{raw!r} is not a whole number")
    if name is not None:
        for t in tiers.tiers:
            if t.name == name:
                return t.name, priority if priority is not None else t.min_priority
        raise bad("tier", f"unknown tier {name!r} (tiers: {', '.join(t.name for t in tiers.tiers)})")
    if cls is not None:
        for t in tiers.tiers:
            if cls in t.classes:
                return t.name, priority if priority is not None else t.min_priority
        if priority is None:
            raise bad(
                "priority_class", f"PriorityClass {cls!r} is in no tier's classes and the row has no priority"
            )
    if priority is None:
        raise bad("tier", "missing value (give tier, priority_class or priority)")
    return tiers.tier_of(priority).name, priority


def _integer(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if v.is_integer() else None
    text = str(v).strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if re.fullmatch(r"[+-]?\d+\.0*", text):
        return int(float(text))
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        f = float(v)
    else:
        try:
            f = float(str(v))
        except ValueError:
            return None
    return f if math.isfinite(f) else None


def _timestamp(v: Any) -> float | None:
    if (n := _number(v)) is not None:
        return n
    try:
        t = datetime.fromisoformat(str(v))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def _seconds(v: Any) -> float | None:
    if (n := _number(v)) is not None:
        return n
    try:
        return parse_duration(str(v))
    except ValueError:
        return None


def _quantity(v: Any, *, cpu: bool) -> int | None:
    """Return millicores (cpu) or bytes; None when absent; raise ValueError when it cannot be read."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise ValueError(v)
    if isinstance(v, int | float):
        return round(v * 1000) if cpu else round(v)
    m = _QUANTITY.match(str(v))
    if not m or m.group(2) not in ({"", "m"} if cpu else _MEM):
        raise ValueError(v)
    number, suffix = float(m.group(1)), m.group(2)
    if cpu:
        return round(number) if suffix == "m" else round(number * 1000)
    return round(number * _MEM[suffix])
