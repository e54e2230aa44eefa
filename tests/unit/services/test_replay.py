"""The replay as the command and the service run it: text in, policies named, the observed run, the rows
counted before a request is taken."""

from __future__ import annotations

import io

import pytest

from watchtower.services.replay import (
    ReplayInputError,
    count_rows,
    read_policy,
    replay_document,
)

NODES = "nodes: {count: 2, gpus: 8}\n"
CSV = """id,team,tier,submitted,started,duration,pods,gpus_per_pod
a,nlp,low,0,0,3600,1,8
b,nlp,low,60,,600,1,8
"""


def test_rows_are_counted_without_the_csv_header_and_blank_lines():
    assert count_rows(CSV + "\n\n") == 2
    assert count_rows('{"id": "a"}\n\n{"id": "b"}\n') == 2
    assert count_rows("") == 0


def test_a_policy_is_named_after_its_source_unless_it_says_name():
    assert read_policy(NODES, "a.yaml", default_name="a").policy.name == "a"
    assert read_policy("name: b\n" + NODES, "a.yaml", default_name="a").policy.name == "b"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("nodes: [\n", "line 2, column 1: not valid YAML"),
        ("- 1\n", "(top level): a mapping is expected, not list"),
        ("", "nodes: missing"),
        (NODES + "termination_grace: soon\n", "termination_grace: "),
    ],
)
def test_a_bad_policy_names_its_source_and_what_is_wrong(text, problem):
    with pytest.raises(ReplayInputError) as e:
        read_policy(text, "p.yaml", default_name="p")
    assert e.value.source == "p.yaml"
    assert e.value.problems[0].startswith(problem), e.value.problems


def test_the_observed_run_holds_only_the_jobs_with_a_start_and_the_replay_all_of_them():
    policy = read_policy(NODES, "p.yaml", default_name="p")
    doc = replay_document(lambda: io.StringIO(CSV), [policy])
    observed, replayed = doc["runs"]
    assert doc["trace"] == {"jobs": 2, "observed_jobs": 1, "skipped": {}}
    assert (observed["kind"], observed["jobs"], replayed["kind"], replayed["jobs"]) == (
        "observed",
        1,
        "replayed",
        2,
    )
    assert observed["capacity_gpus"] == replayed["capacity_gpus"] == 16


def test_without_any_start_there_is_no_observed_run():
    policy = read_policy(NODES, "p.yaml", default_name="p")
    doc = replay_document(lambda: io.StringIO(CSV.replace(",0,0,", ",0,,")), [policy])
    assert [r["kind"] for r in doc["runs"]] == ["replayed"]


def test_a_policy_named_observed_is_refused():
    policy = read_policy("name: observed\n" + NODES, "p.yaml", default_name="p")
    with pytest.raises(ReplayInputError, match="already the name of the observed run"):
        replay_document(lambda: io.StringIO(CSV), [policy])
