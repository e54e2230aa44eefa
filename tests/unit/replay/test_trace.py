"""The trace parser: CSV and JSON lines to jobs, and each malformed row refused with its line and column."""

from __future__ import annotations

import pytest

from watchtower.config.model import Settings
from watchtower.replay.trace import MAX_ROWS, TraceError, format_csv, format_jsonl, parse_csv, parse_jsonl

TIERS = Settings().tier_policy()
HEADER = "id,team,tier,submitted,duration,pods,gpus_per_pod"


def test_csv_rows_become_jobs_in_submission_order() -> None:
    trace = parse_csv(
        "id,team,tier,submitted,duration,pods,gpus_per_pod,cpu_per_pod,memory_per_pod,gang_min,preemptible\n"
        "b,nlp,high,2026-11-30T11:00:00Z,2h,4,8,8,64Gi,4,false\n"
        "a,vision,low,1796032800,3600,1,1,500m,,,\n",
        TIERS,
    )
    assert [j.id for j in trace.jobs] == ["a", "b"]
    a, b = trace.jobs
    assert a.submitted == 1796032800.0 and a.duration == 3600.0 and a.priority == 0
    assert a.cpu_millis_per_pod == 500 and a.memory_bytes_per_pod is None and a.preemptible
    assert b.submitted == 1796032800.0 + 3600 and b.duration == 7200.0 and b.gpus == 32
    assert b.priority == 900_000 and b.memory_bytes_per_pod == 64 * 2**30 and b.gang_min == 4
    assert not b.preemptible


def test_jsonl_takes_the_same_columns() -> None:
    trace = parse_jsonl(
        '{"id": "a", "team": "nlp", "priority": 950000, "submitted": "2026-11-30T10:00:00",'
        ' "started": 1796032900, "finished": 1796036500, "pods": 2, "gpus_per_pod": 4}\n\n',
        TIERS,
    )
    (job,) = trace.jobs
    assert job.tier == "high" and job.priority == 950_000
    assert job.started == 1796032900.0 and job.duration == 3600.0 and job.gpus == 8


def test_priority_class_names_the_tier_and_a_value_alone_is_resolved_like_a_pod() -> None:
    trace = parse_csv(
        "id,team,priority_class,priority,submitted,duration,pods,gpus_per_pod\n"
        "a,t,experiment,,0,60,1,1\n"
        "b,t,unlisted,1000001,1,60,1,1\n",
        TIERS,
    )
    assert [(j.tier, j.priority) for j in trace.jobs] == [("medium", 500_000), ("critical", 1_000_001)]


def test_rows_asking_no_gpus_are_skipped_and_counted() -> None:
    trace = parse_csv(f"{HEADER}\na,t,low,0,60,1,0\nb,t,low,0,60,1,1\nc,t,low,0,60,3,0\n", TIERS)
    assert [j.id for j in trace.jobs] == ["b"]
    assert trace.skipped == {"no GPUs asked": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,team,submitted,duration,pods\n", "line 1: missing column gpus_per_pod"),
        ("id,team,submitted,duration,pods,gpus_per_pod\n", "line 1: missing column tier"),
        ("id,team,tier,submitted,pods,gpus_per_pod\n", "line 1: missing column duration"),
        (
            "id,team,tier,submitted,duration,pods,gpus_per_pod,colour\n",
            "line 1, column colour: unknown column",
        ),
        (f"{HEADER}\na,t,low,0,60,1\n", "line 2: 6 cells where the header names 7 columns"),
        (f"{HEADER}\na,t,low,0,60,1,1\nb,t,low,0,-5,1,1\n", "line 3, column duration: negative duration -5s"),
        (f"{HEADER}\na,t,urgent,0,60,1,1\n", "line 2, column tier: unknown tier 'urgent'"),
        (f"{HEADER}\na,t,low,0,60,two,1\n", "line 2, column pods: 'two' is not a whole number"),
        (f"{HEADER}\na,t,low,0,60,0,1\n", "line 2, column pods: 0 is below 1"),
        (f"{HEADER}\na,t,low,0,60,1,1.5\n", "line 2, column gpus_per_pod: '1.5' is not a whole number"),
        (f"{HEADER}\na,t,low,yesterday,60,1,1\n", "line 2, column submitted: 'yesterday' is neither"),
        (f"{HEADER}\na,t,low,0,soon,1,1\n", "line 2, column duration: 'soon' is not a duration"),
        (f"{HEADER}\na,,low,0,60,1,1\n", "line 2, column team: missing value"),
        (
            f"{HEADER}\na,t,low,0,60,1,1\na,t,low,0,60,1,1\n",
            "line 3, column id: 'a' is already the id of line 2",
        ),
        (
            "id,team,tier,submitted,started,finished,pods,gpus_per_pod\na,t,low,0,10,5,1,1\n",
            "line 2, column finished: before started",
        ),
        (
            "id,team,tier,submitted,finished,pods,gpus_per_pod\na,t,low,0,5,1,1\n",
            "line 2, column finished: without started the run time is unknown",
        ),
        (
            "id,team,priority_class,submitted,duration,pods,gpus_per_pod\na,t,nightly,0,60,1,1\n",
            "line 2, column priority_class: PriorityClass 'nightly' is in no tier's classes",
        ),
        (
            "id,team,tier,submitted,duration,pods,gpus_per_pod,gang_min\na,t,low,0,60,2,1,3\n",
            "line 2, column gang_min: 3 is more than the job's 2 pods",
        ),
        (
            "id,team,tier,submitted,duration,pods,gpus_per_pod,memory_per_pod\na,t,low,0,60,1,1,lots\n",
            "line 2, column memory_per_pod: 'lots' is not a memory quantity",
        ),
        (
            "id,team,tier,submitted,duration,pods,gpus_per_pod,preemptible\na,t,low,0,60,1,1,maybe\n",
            "line 2, column preemptible: 'maybe' is neither true nor false",
        ),
        ("", "line 1: the trace is empty"),
    ],
)
def test_a_malformed_csv_row_is_refused_naming_its_line_and_column(text: str, message: str) -> None:
    with pytest.raises(TraceError) as e:
        parse_csv(text, TIERS)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "a"\n', "line 1: not JSON"),
        ("[1, 2]\n", "line 1: a JSON object is expected, not list"),
        ('{"id": "a", "colour": 1}\n', "line 1, column colour: unknown column"),
        (
            '\n{"id": "a", "team": "t", "tier": "low", "submitted": 0, "duration": 60, "pods": 1}\n',
            "line 2, column gpus_per_pod: missing value",
        ),
        (
            '{"id": "a", "team": "t", "tier": "low", "submitted": 0, "duration": -1, "pods": 1, "gpus_per_pod": 1}',
            "line 1, column duration: negative duration",
        ),
    ],
)
def test_a_malformed_json_line_is_refused_naming_its_line_and_column(text: str, message: str) -> None:
    with pytest.raises(TraceError) as e:
        parse_jsonl(text, TIERS)
    assert message in str(e.value)


def test_ten_million_rows_are_refused_at_the_cap_without_reading_them_all() -> None:
    read = 0

    def lines():  # type: ignore[no-untyped-def]
        nonlocal read
        yield HEADER
        for i in range(10_000_000):
            read += 1
            yield f"j{i},t,low,{i},60,1,1"

    with pytest.raises(TraceError, match=r"line 1002: the trace has more than 1,000 rows"):
        parse_csv(lines(), TIERS, max_rows=1000)
    assert read < 1010
    assert MAX_ROWS < 10**7


def test_a_written_trace_reads_back_to_the_same_jobs() -> None:
    jobs = parse_csv(
        "id,team,tier,submitted,started,duration,pods,gpus_per_pod,cpu_per_pod,memory_per_pod,gang_min,preemptible\n"
        '"a,1",nlp,high,1796032800.25,1796032900,2h,4,8,8,64Gi,2,false\n'
        "b,vision,low,1796032801,,0.1,1,1,,,,\n",
        TIERS,
    ).jobs
    assert parse_csv(format_csv(jobs), TIERS).jobs == jobs
    assert parse_jsonl(format_jsonl(jobs), TIERS).jobs == jobs


def test_a_spreadsheets_byte_order_mark_is_not_part_of_the_first_column() -> None:
    (job,) = parse_csv(f"\ufeff{HEADER}\na,t,low,0,60,1,1\n", TIERS).jobs
    assert job.id == "a"


def test_a_jobs_grace_and_deletion_are_read_and_written_back() -> None:
    trace = parse_csv(
        [
            "id,team,tier,submitted,duration,pods,gpus_per_pod,grace,deleted\n",
            "a,t,low,2026-01-05T00:00:00Z,1h,1,1,10m,2026-01-05T02:00:00Z\n",
        ],
        TIERS,
    )
    (a,) = trace.jobs
    assert a.grace == 600 and a.deleted == a.submitted + 7200
    assert parse_csv("".join(format_csv(trace.jobs)).splitlines(keepends=True), TIERS).jobs == trace.jobs
    with pytest.raises(TraceError, match="line 2, column grace"):
        parse_csv(
            ["id,team,tier,submitted,duration,pods,gpus_per_pod,grace\n", "a,t,low,0,1h,1,1,-5\n"], TIERS
        )


def test_a_bare_pod_is_read_as_having_no_controller_and_written_back() -> None:
    trace = parse_csv(
        ["id,team,tier,submitted,duration,pods,gpus_per_pod,controller\n", "a,t,low,0,1h,1,1,false\n"], TIERS
    )
    (a,) = trace.jobs
    assert not a.controller
    assert parse_csv("".join(format_csv(trace.jobs)).splitlines(keepends=True), TIERS).jobs == trace.jobs
    with pytest.raises(TraceError, match="line 2, column controller: 'bare' is neither true nor false"):
        parse_csv(
            ["id,team,tier,submitted,duration,pods,gpus_per_pod,controller\n", "a,t,low,0,1h,1,1,bare\n"],
            TIERS,
        )
