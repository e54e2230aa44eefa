"""The fleet rows' summaries, from the JSON a Watchtower answers: missing is never zero."""

from __future__ import annotations

from watchtower.adapters.fleet import gpus_gauge
from watchtower.domain.fleet import FleetRow, TierLine, firing_alerts, free_gpus, idle_gpus, tier_line

OLDEST = {
    "wait_seconds": 1250.5,
    "warn_after_seconds": 900,
    "critical_after_seconds": 3600,
    "severity": "warning",
}


def test_a_tier_line_reads_the_total_and_the_first_workload_as_the_longest_wait():
    assert tier_line("high", {"total": 7, "workloads": [OLDEST]}) == TierLine(
        "high", 7, 1250.5, 900.0, 3600.0, "warning"
    )
    assert tier_line("high", {"total": 0, "workloads": []}) == TierLine("high", 0)
    assert tier_line("gold", None) == TierLine("gold", None)  # no such tier there, not zero


def test_firing_counts_the_active_alerts_and_none_means_not_known():
    alerts = [
        {"state": "firing", "silencedBy": [], "inhibitedBy": []},
        {"state": "firing", "silencedBy": ["s1"], "inhibitedBy": []},
        {"state": "pending", "silencedBy": [], "inhibitedBy": []},
        {"state": "resolved", "silencedBy": [], "inhibitedBy": []},
    ]
    assert firing_alerts(alerts) == 1
    assert firing_alerts([]) == 0 and firing_alerts(None) is None


def test_gpus_free_and_idle():
    text = (
        "# HELP watchtower_gpus GPUs of schedulable GPU nodes.\n# TYPE watchtower_gpus gauge\n"
        'watchtower_gpus{state="allocatable"} 96.0\nwatchtower_gpus{state="used"} 88.0\n'
        'watchtower_gpus_other{state="used"} 1.0\n'
    )
    assert gpus_gauge(text) == {"allocatable": 96.0, "used": 88.0}
    assert free_gpus(gpus_gauge(text)) == 8
    assert free_gpus({}) is None and free_gpus(None) is None
    assert idle_gpus({"available": True, "idle_gpus": 3}) == 3
    assert idle_gpus({"available": False, "idle_gpus": 0}) is None and idle_gpus(None) is None


def test_a_missing_row_says_so_in_its_json():
    row = FleetRow("b", "http://b/", missing="no answer within 2 s").as_json()
    assert row["answered"] is False and row["missing"] == "no answer within 2 s"
    assert row["tiers"] == [] and row["gpus_free"] is None and row["firing_alerts"] is None
