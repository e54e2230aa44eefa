"""`watchtower analyze` end to end: a kubectl dump in, the queue out, through the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AT = "2027-01-15T10:00:00Z"


def analyze(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "analyze", *args],
        capture_output=True,
        input=stdin,
        timeout=120,
    )


@pytest.fixture(scope="module")
def doc() -> dict:
    r = analyze("--objects", str(FIXTURES / "cluster.json"), "--at", AT, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def by_name(doc: dict) -> dict[str, dict]:
    return {w["name"]: w for w in doc["workloads"]}


def test_fixtures_are_reproducible_from_their_script():
    import orjson

    from tests.fixtures import make_dumps

    for name, content in make_dumps.dumps().items():
        assert json.loads((FIXTURES / name).read_bytes()) == json.loads(orjson.dumps(content)), name


def test_json_has_the_documented_fields(doc):
    assert doc["schema_version"] == 1 and doc["at"] == AT
    workload_fields = {
        "namespace",
        "name",
        "kind",
        "team",
        "tier",
        "state",
        "wait_seconds",
        "gpus_requested",
        "pods_pending",
        "pods_running",
        "reasons",
        "preemption",
    }
    for w in doc["workloads"]:
        assert workload_fields <= set(w)
        assert w["state"] in {"pending", "partial", "running", "gated", "quota_blocked"}
        assert w["preemption"] in {"possible", "no_victims", "not_helpful", "policy_never", "unknown"}
        assert all(set(r) >= {"reason", "nodes"} for r in w["reasons"])
    (p,) = doc["preemptions"]
    assert {
        "victim_uid",
        "victim_namespace",
        "victim_name",
        "victim_tier",
        "preemptor_uid",
        "node",
        "gpus",
        "gpu_hours_lost",
    } <= set(p)
    assert {"uid", "namespace", "name", "reason"} <= set(doc["disruptions"][0])
    assert {"namespace", "name", "gpus_requested", "free_gpus_total", "largest_free_on_one_node"} <= set(
        doc["fragmentation"][0]
    )


def test_partial_gang_over_its_threshold(doc):
    w = by_name(doc)["llm-pretrain"]
    assert (w["kind"], w["team"], w["tier"], w["state"], w["severity"]) == (
        "PaddleJob",
        "perception",
        "critical",
        "partial",
        "critical",
    )
    assert (w["pods_running"], w["pods_pending"], w["gpus_held"], w["wait_seconds"]) == (2, 2, 16, 7200)
    assert w["reasons"][:2] == [
        {
            "reason": "untolerated taint",
            "nodes": 1,
            "text": "node(s) had untolerated taint {nvidia.com/maintenance: true}",
        },
        {"reason": "Insufficient nvidia.com/gpu", "nodes": 3, "text": "Insufficient nvidia.com/gpu"},
    ]
    assert w["preemption"] == "no_victims"
    assert [g["name"] for g in doc["partial_gangs"]] == ["llm-pretrain"]


def test_preemption_with_preemptor_and_gpu_hours_lost(doc):
    (p,) = doc["preemptions"]
    assert (p["victim_namespace"], p["victim_name"], p["victim_tier"], p["node"], p["gpus"]) == (
        "speech",
        "asr-train-worker-0",
        "low",
        "gpu-c",
        4,
    )
    assert (p["preemptor_namespace"], p["preemptor_name"], p["preemptor_tier"]) == (
        "nlp",
        "debug-7",
        "critical",
    )
    assert p["reason"] == "PreemptionByScheduler"
    # Started at T0 - 3h + 21 s, preempted at T0 + 6000 s, on 4 GPUs.
    assert p["gpu_hours_lost"] == pytest.approx(4 * (3 * 3600 - 21 + 6000) / 3600, abs=1e-6)
    assert by_name(doc)["debug-7"]["preemption"] == "possible"


def test_other_states_quota_gated_and_disruptions(doc):
    w = by_name(doc)
    assert (w["bert-ft"]["state"], w["bert-ft"]["gpus_requested"], w["bert-ft"]["quota"]["name"]) == (
        "quota_blocked",
        4,
        "gpu-quota",
    )
    # Issue 30: gated by Kueue is waiting work, alerted at its tier's thresholds.
    assert (w["queued-by-kueue"]["state"], w["queued-by-kueue"]["severity"]) == ("pending", "warning")
    assert w["queued-by-kueue"]["gated"]["owner"] == "kueue"
    assert doc["gated_pods"] == 1
    assert [(d["name"], d["reason"]) for d in doc["disruptions"]] == [("old-eval", "Evicted")]
    assert w["etl"]["kind"] == "Job" and w["etl"]["reasons"][0]["reason"] == "untolerated taint"


def test_fragmentation_and_capacity(doc):
    assert [
        (f["name"], f["gpus_requested"], f["free_gpus_total"], f["largest_free_on_one_node"])
        for f in doc["fragmentation"]
    ] == [("debug-7", 4, 4, 2), ("big-eval", 3, 4, 2)]
    cap = doc["capacity"]
    assert (cap["gpus_allocatable"], cap["gpus_used"], cap["gpus_free"]) == (34, 22, 4)


def test_same_dump_gives_the_same_json(doc):
    r = analyze("--objects", str(FIXTURES / "cluster.json"), "--at", AT, "--format", "json")
    assert json.loads(r.stdout) == doc


def test_dump_read_from_stdin():
    r = analyze(
        "--objects", "-", "--at", AT, "--format", "json", stdin=(FIXTURES / "cluster.json").read_bytes()
    )
    assert (
        r.returncode == 0
        and len([w for w in json.loads(r.stdout)["workloads"] if w["state"] != "running"]) == 6
    )


def test_table_output():
    r = analyze("--objects", str(FIXTURES / "cluster.json"), "--at", AT)
    assert r.returncode == 0
    out = r.stdout.decode()
    assert out.startswith(f"Queue at {AT}\nGPUs: 22/34 allocated, 4 free")
    for heading in [
        "Waiting workloads",
        "Partial gangs",
        "Fragmentation",
        "Preemptions",
        "Other disruptions",
    ]:
        assert heading in out
    line = next(ln for ln in out.splitlines() if "PaddleJob/llm-pretrain" in ln and "partial" in ln)
    assert "5m/15m CRITICAL" in line and "2/4" in line


def test_malformed_items_are_skipped_and_listed():
    r = analyze("--objects", str(FIXTURES / "malformed.json"), "--at", AT, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert [w["name"] for w in doc["workloads"]] == ["fine"]
    assert doc["skipped_total"] == {"Pod": 2, "Node": 1, "Unknown": 1}
    assert {(s["kind"], s["name"]) for s in doc["skipped"]} >= {("Pod", "no-uid"), ("Pod", "bad-time")}
    assert doc["ignored_kinds"] == {"ConfigMap": 1}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, b"cannot read"),
        (b"{not json", b"not a Kubernetes List"),
        (b"[1, 2]", b"not a Kubernetes List"),
        (b'{"kind": "Pod", "metadata": {"name": "x"}}', b"expected kind List"),
    ],
)
def test_bad_file_is_a_clear_error_with_exit_2(tmp_path, content, message):
    f = tmp_path / "dump.json"
    if content is not None:
        f.write_bytes(content)
    r = analyze("--objects", str(f), "--at", AT)
    assert r.returncode == 2
    assert message in r.stderr and b"Traceback" not in r.stderr


def test_bad_time_and_format_are_usage_errors():
    for args in (["--at", "yesterday"], ["--at", "2027-01-15T10:00:00"], ["--format", "xml"]):
        r = analyze("--objects", str(FIXTURES / "cluster.json"), *args)
        assert r.returncode == 2 and b"Traceback" not in r.stderr, args


DUMP_TIME = "2027-01-15T09:59:10Z"  # the newest time cluster.json holds (a pod's PodScheduled transition)


def analyze_env(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "analyze", *args], capture_output=True, env=env, timeout=120
    )


def test_without_at_the_dump_is_read_as_of_its_own_newest_time():
    r = analyze_env("--objects", str(FIXTURES / "cluster.json"), "--format", "json")
    assert r.returncode == 0 and r.stderr == b""
    doc = json.loads(r.stdout)
    assert (doc["at"], doc["at_source"]) == (DUMP_TIME, "dump")
    w = by_name(doc)
    # Read at the wall clock, years away, every wait was 0s and the refused job was out of its window.
    assert w["bert-ft"]["state"] == "quota_blocked" and w["bert-ft"]["wait_seconds"] > 0
    assert w["llm-pretrain"]["wait_seconds"] == 2 * 3600 - 50
    table = analyze_env("--objects", str(FIXTURES / "cluster.json"), columns=200).stdout.decode()
    assert table.startswith(f"Queue as of {DUMP_TIME}, the newest time in the dump; --at to choose\n")


def test_at_far_from_the_dump_warns_on_stderr_and_still_answers():
    r = analyze_env("--objects", str(FIXTURES / "cluster.json"), "--at", "2027-01-15T15:00:00Z")
    assert r.returncode == 0
    assert r.stderr.decode() == (
        "warning: --at 2027-01-15T15:00:00Z is 5h50s after the newest time in the dump "
        f"({DUMP_TIME}): waits are measured from --at\n"
    )
    assert r.stdout.decode().startswith("Queue at 2027-01-15T15:00:00Z\n")
    near = analyze_env("--objects", str(FIXTURES / "cluster.json"), "--at", AT)
    assert near.returncode == 0 and near.stderr == b""


def waiting_section(out: str) -> list[str]:
    return out.split("Waiting workloads\n", 1)[1].split("\n\n", 1)[0].splitlines()


LLM_WHY = (
    "gang partly placed: 2 pod(s) hold 16 GPU(s), no node fits (4 tried): 1 node has a taint the pod does "
    "not tolerate; 3 nodes lack 8 free GPUs; preemption cannot help: no lower-priority pods to evict"
)


def test_on_an_80_column_terminal_the_why_goes_under_its_row_wrapped_whole():
    out = analyze_env("--objects", str(FIXTURES / "cluster.json"), "--at", AT, columns=80).stdout.decode()
    lines = waiting_section(out)
    assert "WHY" not in lines[0]
    i = next(n for n, ln in enumerate(lines) if "PaddleJob/llm-pretrain" in ln)
    why = []
    for ln in lines[i + 1 :]:
        if not ln.startswith("    "):
            break
        assert len(ln) <= 80, ln
        why.append(ln.strip())
    assert " ".join(why) == "why: " + LLM_WHY  # whole, the preemption verdict included


def test_on_a_200_column_terminal_the_why_column_wraps_within_the_width():
    out = analyze_env("--objects", str(FIXTURES / "cluster.json"), "--at", AT, columns=200).stdout.decode()
    lines = waiting_section(out)
    assert lines[0].endswith("WHY") and all(len(ln) <= 200 for ln in lines), max(map(len, lines))
    start = lines[0].index("WHY")
    i = next(n for n, ln in enumerate(lines) if "PaddleJob/llm-pretrain" in ln)
    why = [lines[i][start:]]
    for ln in lines[i + 1 :]:
        if ln[:start].strip():
            break
        why.append(ln[start:])
    assert " ".join(why) == LLM_WHY and len(why) > 1
    assert len(why[0]) > 80  # it uses the width it has


def test_a_deployment_refused_by_its_quota_is_shown_in_its_templates_tier(tmp_path):
    """No pod exists: the tier comes from the ReplicaSet's template, and the row names the Deployment."""
    from datetime import datetime

    from watchtower.simulator import objects as o

    t = datetime.fromisoformat(AT).timestamp()
    rs = "serve-0010-7d9f8b6c5"
    objects = [
        o.namespace("ads", team="ads"),
        o.priority_class("online-serving", 900_000),
        o.resource_quota("ads", "gpu-quota", hard_gpus=8, used_gpus=8),
        o.replica_set(
            name=rs,
            namespace="ads",
            created=t - 1200,
            template=o.pod_template(gpus=2, priority_class="online-serving"),
            replicas=2,
            deployment="serve-0010",
        ),
        o.core_event(
            namespace="ads",
            reason="FailedCreate",
            message=f'Error creating: pods "{rs}-x7k2p" is forbidden: exceeded quota: gpu-quota, '
            "requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=8, "
            "limited: requests.nvidia.com/gpu=8",
            type_="Warning",
            component="replicaset-controller",
            involved={
                "kind": "ReplicaSet",
                "namespace": "ads",
                "name": rs,
                "uid": "rs-1",
                "apiVersion": "apps/v1",
            },
            at=t - 1200,
            last=t - 60,
            count=12,
        ),
    ]
    dump = tmp_path / "refused.json"
    dump.write_text(json.dumps(o.object_list(objects)))

    r = analyze("--objects", str(dump), "--at", AT, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    (w,) = json.loads(r.stdout)["workloads"]
    assert (w["kind"], w["name"], w["state"], w["tier"], w["priority_class"]) == (
        "Deployment",
        "serve-0010",
        "quota_blocked",
        "high",
        "online-serving",
    )
    # Refused for 20 minutes: past the high tier's 15-minute warning (the lowest tier's is 2 hours).
    assert (w["gpus_requested"], w["wait_seconds"], w["severity"]) == (4, 1200, "warning")

    r = analyze("--objects", str(dump), "--at", AT)
    assert r.returncode == 0, r.stderr.decode()
    line = next(ln for ln in r.stdout.decode().splitlines() if "Deployment/serve-0010" in ln)
    assert line.split()[:3] == ["high", "ads", "Deployment/serve-0010"]
    assert "quota_blocked  20m   15m/1h WARNING  4" in line


def test_a_dump_with_gangs_reads_volcano_and_upstream_podgroups_apart(tmp_path):
    real = FIXTURES / "real"
    items = [
        json.loads((real / f"{name}.json").read_text())
        for name in (
            "volcano-queue",
            "volcano-podgroup-shaped",
            "paddlejob-pending-no-pods",
            "podgroup-v1alpha2-gang-incomplete",
        )
    ]
    for i in range(3):  # pods of the upstream gang, in PreEnqueue: no condition at all
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"trainer-{i}",
                    "namespace": "vision",
                    "uid": f"gang-pod-{i}",
                    "creationTimestamp": "2027-01-15T08:00:00Z",
                },
                "spec": {
                    "schedulingGroup": {"podGroupName": "trainer-0"},
                    "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                },
                "status": {"phase": "Pending"},
            }
        )
    dump = tmp_path / "gangs.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    r = analyze("--objects", str(dump), "--at", "2027-01-15T08:30:00Z", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert not doc["skipped"] and doc["ignored_kinds"] == {}
    by_name = {w["name"]: w for w in doc["workloads"]}
    gang = by_name["trainer-0"]
    assert (gang["kind"], gang["source"], gang["why"]) == (
        "PodGroup",
        "podgroup",
        "gang incomplete: 3 of minCount 4 pods exist",
    )
    job = by_name["ocr-train"]
    assert (job["kind"], job["source"], job["volcano_queue"], job["pods_expected"], job["wait_seconds"]) == (
        "PaddleJob",
        "volcano-podgroup",
        "vision-q",
        4,
        1800.0,
    )


def test_a_train_jobs_pods_and_refused_child_job_are_one_workload(tmp_path):
    """A `kubectl get jobsets,jobs,pods,events -A -o json` dump: the TrainJob is one row, not one per Job."""
    from datetime import datetime

    from watchtower.simulator import objects as o
    from watchtower.simulator.forms.jobset import objects as js_o

    t = datetime.fromisoformat(AT).timestamp()
    tpl = o.pod_template(gpus=8, priority_class="batch")
    js = js_o.jobset(
        name="llama-ft",
        namespace="nlp",
        created=t - 1800,
        replicated_jobs={"node": (2, 2, tpl)},
        train_job=True,
    )
    first, second = js_o.child_jobs(js)
    pods = js_o.child_pods(
        first, created=t - 1790, gpus=8, node="gpu-1", phase="Running", conditions=[o.scheduled(t - 1780)]
    )
    refusal = o.core_event(
        namespace="nlp",
        reason="FailedCreate",
        message=f'Error creating: pods "{second["metadata"]["name"]}-0-x7k2p" is forbidden: exceeded quota: '
        "gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, "
        "limited: requests.nvidia.com/gpu=16",
        type_="Warning",
        component="job-controller",
        involved={
            "kind": "Job",
            "namespace": "nlp",
            "name": second["metadata"]["name"],
            "uid": second["metadata"]["uid"],
            "apiVersion": "batch/v1",
        },
        at=t - 1790,
        last=t - 30,
        count=40,
    )
    objects = [
        o.namespace("nlp", team="nlp"),
        o.priority_class("batch", 1000),
        o.node("gpu-1"),
        o.resource_quota("nlp", "gpu-quota", hard_gpus=16, used_gpus=16),
        *pods,
        refusal,
        second,
        js,
        first,
    ]
    dump = tmp_path / "trainjob.json"
    dump.write_text(json.dumps(o.object_list(objects)))

    r = analyze("--objects", str(dump), "--at", AT, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    (w,) = [w for w in json.loads(r.stdout)["workloads"] if w["namespace"] == "nlp"]
    assert (w["kind"], w["name"], w["state"], w["pods_running"]) == (
        "TrainJob",
        "llama-ft",
        "quota_blocked",
        2,
    )
    assert w["why"].startswith("refused by ResourceQuota gpu-quota")


def test_a_head_stuck_despite_capacity_is_alerted_as_the_service_would(tmp_path):
    """The one node has 8 free GPUs; the head of the medium tier asks for 4 and has waited 20 minutes."""
    from datetime import datetime

    from watchtower.simulator import objects as o

    t = datetime.fromisoformat(AT).timestamp()
    said = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    objects = [
        o.namespace("nlp", team="nlp"),
        o.node("gpu-1"),
        o.pod(
            name="train-0",
            namespace="nlp",
            created=t - 1200,
            gpus=4,
            priority=500_000,
            conditions=[o.unschedulable(t - 1190, said)],
        ),
    ]
    dump = tmp_path / "stuck.json"
    dump.write_text(json.dumps(o.object_list(objects)))

    r = analyze("--objects", str(dump), "--at", AT, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    (w,) = doc["workloads"]
    assert w["stuck_despite_capacity"] is not None
    (a,) = [a for a in doc["alerts"] if a["rule"] == "WorkloadStuckDespiteCapacity"]
    assert (a["severity"], a["labels"]["workload"], a["labels"]["tier"]) == ("warning", "train-0", "medium")
    assert a["summary"] == (
        "Pod nlp/train-0 (medium tier, 4 GPU) heads its tier and fits on node gpu-1, yet has waited 20m"
    )
