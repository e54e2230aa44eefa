"""`watchtower replay`: a trace (or a week the service recorded) replayed under each policy file, the runs
side by side as text, JSON, CSV or an HTML page; `--export` writes a recorded week as a trace
(docs/replay.md)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from watchtower.config.model import Settings, TierConfig
from watchtower.domain.fairness.week import IsoWeek
from watchtower.replay.policy import NodeSpec
from watchtower.replay.trace import TraceJob, format_csv, format_jsonl
from watchtower.services.replay import NamedPolicy, ReplayInputError, read_policy, replay_document
from watchtower.services.replay_formats import as_csv, as_json, as_text

FORMATS = ("text", "json", "csv", "html")
EXPORT_FORMATS = ("csv", "jsonl")


def _lines(path: Path) -> Iterator[str]:
    """Yield the file's lines one by one (the trace parser's row cap refuses a huge file as it reads)."""
    try:
        with path.open(encoding="utf-8", newline="") as f:
            yield from f
    except OSError as e:
        raise ReplayInputError(str(path), [f"cannot read: {e.strerror}"]) from None
    except UnicodeDecodeError:
        raise ReplayInputError(str(path), ["not UTF-8 text"]) from None


def load_policy(
    path: Path, *, default_nodes: Sequence[NodeSpec] = (), default_tiers: Sequence[TierConfig] = ()
) -> NamedPolicy:
    """Return the policy file at `path`, named after the file unless it says `name:` (without `nodes`, it
    takes `default_nodes`; without `tiers`, `default_tiers` when given); ReplayInputError naming the file and
    each problem's key."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ReplayInputError(str(path), [f"cannot read: {e.strerror}"]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReplayInputError(str(path), ["not UTF-8 text"]) from None
    return read_policy(
        text, str(path), default_name=path.stem, default_nodes=default_nodes, default_tiers=default_tiers
    )


def render(doc: dict[str, Any], fmt: str) -> bytes:
    """Return the document in `fmt` (one of FORMATS)."""
    if fmt == "json":
        return as_json(doc)
    if fmt == "csv":
        return as_csv(doc).encode()
    if fmt == "html":
        from watchtower.bootstrap import replay_presenter

        return replay_presenter().page(doc).encode()
    return as_text(doc).encode()


def run_replay(trace: Path, policies: Sequence[Path], fmt: str) -> bytes:
    """Return the replay of `trace` under each policy file in `fmt`; raise ReplayInputError naming the file
    (and the row or key) of the first bad input."""
    named = [load_policy(p) for p in policies]
    doc = replay_document(lambda: _lines(trace), named, trace_source=str(trace))
    return render(doc, fmt)


def recorded_week(settings: Settings, week: str) -> tuple[list[TraceJob], list[NodeSpec]]:
    """Return the jobs that arrived in `week` (an ISO week, in `fairness.timezone`) and the nodes seen then,
    from the configured store; ReplayInputError when the week is not one or nothing was recorded in it.
    Raises StartupError when there is no store to read."""
    import zoneinfo

    from watchtower.bootstrap import replay_records

    source = f"--week {week}"
    try:
        iso = IsoWeek.parse(week)
    except ValueError as e:
        raise ReplayInputError(source, [str(e)]) from None
    start, end = iso.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
    with replay_records(settings) as records:
        jobs, nodes = list(records.replay_jobs(start, end)), list(records.replay_nodes(start, end))
    if not jobs:
        raise ReplayInputError(
            source,
            [
                f"nothing recorded in {iso}: the service records each week as it runs (docs/replay.md); use --trace FILE"
            ],
        )
    return jobs, nodes


def run_week(settings: Settings, week: str, policies: Sequence[Path], fmt: str) -> bytes:
    """Return the replay of the recorded `week` under each policy file in `fmt`: the observed run is the
    recorded starts; a policy without `nodes` takes the week's recorded inventory."""
    jobs, nodes = recorded_week(settings, week)
    # The running configuration's tiers stand in for a policy's missing ones, as in the report's What if.
    named = [load_policy(p, default_nodes=nodes, default_tiers=settings.tiers) for p in policies]
    doc = replay_document(list, named, trace_source=f"week {week}", recorded=(jobs, settings.tier_policy()))
    return render(doc, fmt)


def export_week(settings: Settings, week: str, fmt: str) -> bytes:
    """Return the recorded `week` as a trace, CSV or JSON lines (`fmt` one of EXPORT_FORMATS)."""
    jobs, _ = recorded_week(settings, week)
    return "".join((format_jsonl if fmt == "jsonl" else format_csv)(jobs)).encode()
