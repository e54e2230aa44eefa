"""`kubectl watchtower why`: work that can never start (its numbers on a line of their own) and running work."""

from __future__ import annotations

from watchtower.commands.kubectl.render import why


def test_why_says_never_with_its_numbers_and_that_waiting_will_not_help() -> None:
    text = "can never start as configured: asks 32 GPUs, ClusterQueue research-cq gives at most 16"
    workload = {
        "namespace": "ml",
        "name": "giant",
        "kind": "Job",
        "state": "pending",
        "wait_seconds": 60,
        "since": "2027-01-15T08:00:00Z",
        "gpus_requested": 32,
        "gpus_held": 0,
        "why": f"{text} (held by Kueue: asks more than ClusterQueue research-cq can ever give)",
        "start_estimate": {"start_in_seconds": None, "text": f"never: {text}"},
        "never": {
            "reason": "kueue_max_quota",
            "asks": "32 GPUs",
            "limit": "ClusterQueue research-cq gives at most 16",
            "source": "ClusterQueue research-cq",
            "text": text,
        },
    }
    out = why({"workload": workload, "preemptions": []}, wide=False)
    assert f"Why:         {text}" in out
    assert (
        "Never:       asks 32 GPUs, ClusterQueue research-cq gives at most 16 (said by ClusterQueue "
        "research-cq): waiting longer will not help"
    ) in out
    assert f"Estimate:    never: {text}" in out


def test_why_on_running_work_says_running_without_a_wait_or_its_limits() -> None:
    """The demo's critical pod, asked for by name once it ran, read "running for 0s (since None)"."""
    workload = {
        "namespace": "team-nlp",
        "name": "debug-0001",
        "kind": "Pod",
        "state": "running",
        "wait_seconds": 0,
        "since": None,
        "warn_after_seconds": 300,
        "critical_after_seconds": 900,
        "gpus_requested": 8,
        "gpus_held": 8,
    }
    out = why({"workload": workload, "preemptions": []}, wide=False)
    assert "State:       running\n" in out
    assert "None" not in out
