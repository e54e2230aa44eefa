"""The scheduler's FailedScheduling / PodScheduled=False wording, as several Kubernetes versions write it."""

from __future__ import annotations

import pytest

from watchtower.domain.messages.scheduler import PreemptionVerdict, explain, parse_scheduling_message


def test_counts_per_reason_and_total_nodes_are_read():
    d = parse_scheduling_message(
        "0/12 nodes are available: 2 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector, "
        "7 Insufficient nvidia.com/gpu."
    )
    assert d.recognised and not d.truncated
    assert d.total_nodes == 12
    assert [(r.reason, r.nodes) for r in d.reasons] == [
        ("Insufficient cpu", 2),
        ("node(s) didn't match Pod's node affinity/selector", 3),
        ("Insufficient nvidia.com/gpu", 7),
    ]
    assert d.nodes_with("Insufficient nvidia.com/gpu") == 7
    assert d.preemption is PreemptionVerdict.UNKNOWN


def test_no_nodes_available_is_recognised_as_an_empty_cluster():
    d = parse_scheduling_message("no nodes available to schedule pods")
    assert d.recognised
    assert d.total_nodes == 0
    assert "no node" in explain(d)


@pytest.mark.parametrize(
    "wording",
    [
        "node(s) had taint {nvidia.com/maintenance: true}, that the pod didn't tolerate",  # 1.18-1.24
        "node(s) had untolerated taint {nvidia.com/maintenance: true}",  # 1.25+
        "node(s) had untolerated taint(s)",  # aggregated
        "node(s) had taints that the pod didn't tolerate",  # before 1.18
        "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",
    ],
)
def test_every_taint_wording_is_one_reason(wording):
    d = parse_scheduling_message(f"0/5 nodes are available: 2 {wording}, 3 Insufficient nvidia.com/gpu.")
    assert [(r.reason, r.nodes) for r in d.reasons] == [
        ("untolerated taint", 2),
        ("Insufficient nvidia.com/gpu", 3),
    ]
    assert d.reasons[0].text == wording


def test_taint_wordings_of_two_versions_add_up():
    d = parse_scheduling_message(
        "0/6 nodes are available: 1 node(s) had taint {a: b}, that the pod didn't tolerate, "
        "5 node(s) had untolerated taint {c: d}."
    )
    assert d.nodes_with("untolerated taint") == 6


@pytest.mark.parametrize(
    ("tail", "verdict"),
    [
        (
            "preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.",
            "no_victims",
        ),
        ("preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.", "not_helpful"),
        ("preemption: not eligible due to preemptionPolicy=Never.", "policy_never"),
        ("preemption: not eligible due to a terminating pod on the nominated node.", "possible"),
        ("preemption: something a future scheduler says.", "unknown"),
    ],
)
def test_preemption_verdicts(tail, verdict):
    d = parse_scheduling_message(f"0/4 nodes are available: 4 Insufficient nvidia.com/gpu. {tail}")
    assert d.preemption.value == verdict
    assert d.nodes_with("Insufficient nvidia.com/gpu") == 4
    assert d.preemption_text == tail.removeprefix("preemption: ")


def test_cut_at_1024_bytes_is_marked_truncated_and_the_cut_piece_is_not_trusted():
    reasons = ", ".join(f"1 node(s) had untolerated taint {{team-{i:03d}: reserved}}" for i in range(60))
    full = f"0/60 nodes are available: {reasons}."
    cut = full.encode()[: 1024 - 4].decode("utf-8", "ignore") + " ..."
    assert len(cut.encode()) <= 1024
    d = parse_scheduling_message(cut)
    assert d.truncated and d.recognised
    assert d.total_nodes == 60
    assert all(r.reason == "untolerated taint" for r in d.reasons[:-1])
    assert d.reasons[-1].reason == "other"  # cut mid-word: kept verbatim, never counted as a known reason
    assert "(message truncated)" in explain(d)


def test_unknown_text_is_kept_verbatim_as_other():
    text = 'running PreBind plugin "VolumeBinding": binding volumes: timed out waiting for the condition'
    d = parse_scheduling_message(text)
    assert not d.recognised
    assert [(r.reason, r.text) for r in d.reasons] == [("other", text)]


def test_unknown_reason_inside_the_grammar_is_other_with_its_count():
    d = parse_scheduling_message("0/3 nodes are available: 3 Something brand new happened.")
    assert d.recognised
    assert [(r.reason, r.nodes, r.text) for r in d.reasons] == [("other", 3, "Something brand new happened")]


@pytest.mark.parametrize("message", ["", None, 42, "   ", "0/", "0/x nodes are available", "\x00\ufffd"])
def test_odd_input_never_raises(message):
    d = parse_scheduling_message(message)
    assert isinstance(d.raw, str)


def test_explain_uses_the_pods_own_verdict_over_the_message():
    d = parse_scheduling_message(
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
        "4 No preemption victims found for incoming pod."
    )
    assert "no lower-priority pods" in explain(d, gpus=8)
    assert "8 free GPUs" in explain(d, gpus=8)
    assert "preemption is under way" in explain(d, verdict=PreemptionVerdict.POSSIBLE)


def test_post_filter_texts_before_the_verdict_are_not_reasons():
    """1.36 with DRA: `<reasons>. no new claims to deallocate, preemption: <verdict>`."""
    d = parse_scheduling_message(
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert [(r.reason, r.nodes) for r in d.reasons] == [("Insufficient nvidia.com/gpu", 2)]
    assert d.preemption is PreemptionVerdict.POLICY_NEVER


# ---- 1.36+ wordings (kube-scheduler pkg/scheduler/framework/preemption, plugins/defaultpreemption) ------


def test_a_found_placement_is_preemption_under_way_on_that_node():
    d = parse_scheduling_message(
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: found a potential placement for "
        "pod on node gpu-7, preempting 2 victims"
    )
    assert d.preemption is PreemptionVerdict.POSSIBLE
    assert (d.preemption_node, d.victims) == ("gpu-7", 2)
    assert d.nodes_with("Insufficient nvidia.com/gpu") == 3
    assert explain(d, gpus=8) == (
        "no node fits (3 tried): 3 nodes lack 8 free GPUs; preemption is under way (evicting 2 pods on node gpu-7)"
    )


def test_the_dry_runs_own_node_reasons_mean_preemption_cannot_help_and_are_counted_once():
    d = parse_scheduling_message(
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Insufficient cpu."
    )
    assert d.preemption is PreemptionVerdict.NOT_HELPFUL
    assert [(r.reason, r.nodes) for r in d.reasons] == [("Insufficient cpu", 3)]
    assert (
        explain(d)
        == "no node fits (3 tried): 3 nodes lack cpu; preemption cannot help: evicting would not make it fit"
    )


@pytest.mark.parametrize(
    ("message", "verdict", "placed"),
    [
        (
            "minCount (4) cannot be satisfied; pod group preemption: found a placement for podgroup, "
            "preempting 1 victims",
            PreemptionVerdict.POSSIBLE,
            None,
        ),
        (
            "minCount (4) cannot be satisfied: 1 scheduled, 0 remaining; pod group preemption: No preemption "
            "victims found for incoming preemptor",
            PreemptionVerdict.NO_VICTIMS,
            1,
        ),
    ],
)
def test_a_pod_group_message_without_a_node_head_is_a_gang_that_cannot_be_placed(message, verdict, placed):
    d = parse_scheduling_message(message)
    assert d.recognised
    assert [r.reason for r in d.reasons] == ["gang cannot be placed"]
    assert (d.gang_min, d.gang_placed, d.preemption) == (4, placed, verdict)
    why = explain(d)
    assert why.startswith(
        "its gang cannot be placed: the scheduler cannot fit the minimum of 4 pods together"
    )
    assert "minCount" not in why


def test_a_pod_group_placement_found_says_how_many_it_evicts():
    d = parse_scheduling_message(
        "minCount (1) cannot be satisfied; pod group preemption: found a placement for podgroup, preempting 1 victims"
    )
    assert explain(d).endswith("; preemption is under way (evicting 1 pod)")


def test_the_old_affinity_umbrella_beside_a_specific_reason_is_not_a_reason():
    d = parse_scheduling_message(
        "0/5 nodes are available: 2 node(s) didn't match pod affinity rules, "
        "2 node(s) didn't match pod affinity/anti-affinity, 3 Insufficient cpu."
    )
    assert [(r.reason, r.nodes) for r in d.reasons] == [
        ("node(s) didn't match pod affinity rules", 2),
        ("Insufficient cpu", 3),
    ]
    assert "affinity/anti-affinity" not in explain(d)


def test_the_affinity_umbrella_alone_is_kept_in_its_own_words():
    d = parse_scheduling_message(
        "0/2 nodes are available: 2 node(s) didn't match pod affinity/anti-affinity."
    )
    assert [(r.reason, r.nodes) for r in d.reasons] == [
        ("node(s) didn't match pod affinity/anti-affinity", 2)
    ]


def test_taints_of_different_keys_are_one_reason_with_the_nodes_summed():
    d = parse_scheduling_message(
        "0/6 nodes are available: 1 node(s) had untolerated taint {team-a: reserved}, 2 Insufficient cpu, "
        "3 node(s) had untolerated taint {nvidia.com/maintenance: true}."
    )
    assert [(r.reason, r.nodes) for r in d.reasons] == [("untolerated taint", 4), ("Insufficient cpu", 2)]
    assert d.reasons[0].text == (
        "node(s) had untolerated taint {team-a: reserved}; node(s) had untolerated taint {nvidia.com/maintenance: true}"
    )
    assert (
        explain(d)
        == "no node fits (6 tried): 4 nodes have a taint the pod does not tolerate; 2 nodes lack cpu"
    )


# ---- Volcano (volcano-sh/volcano pkg/scheduler/api/job_info.go, unschedule_info.go, plugins/gang) ------


def test_volcano_gang_message_gives_the_gang_counts():
    d = parse_scheduling_message(
        "3/4 tasks in gang unschedulable: pod group is not ready, 3 Pending, 1 Running, 4 minAvailable; "
        "Pending: 2 Unschedulable, 1 Schedulable"
    )
    assert d.recognised
    assert [r.reason for r in d.reasons] == ["gang cannot be placed"]
    assert (d.gang_min, d.gang_placed) == (4, 2)  # 1 Running + 1 Pending it could place
    assert explain(d) == (
        "its gang cannot be placed: the scheduler cannot fit the minimum of 4 pods together (only 2 placed)"
    )


def test_volcano_gang_message_with_the_origin_reason_counts_its_nodes():
    """The shape of Volcano's own test data (pkg/scheduler/api/job_info_test.go)."""
    d = parse_scheduling_message(
        "3/6 tasks in gang unschedulable: pod group is not ready, 6 Pending, 6 minAvailable; Pending: "
        "3 Schedulable, 3 Unschedulable. Origin reason is task-6: 0/3 nodes are unavailable: "
        "1 node(s) pod number exceeded, 2 node(s) resource fit failed."
    )
    assert d.total_nodes == 3
    assert [(r.reason, r.nodes) for r in d.reasons] == [
        ("gang cannot be placed", 0),
        ("Too many pods", 1),
        ("node(s) resource fit failed", 2),
    ]
    assert (d.gang_min, d.gang_placed) == (6, 3)
    assert explain(d) == (
        "its gang cannot be placed: the scheduler cannot fit the minimum of 6 pods together (only 3 placed); "
        "no node fits (3 tried): 1 node is full (pod count); 2 nodes lack the resources it requests"
    )


@pytest.mark.parametrize(
    "message",
    [
        "0/4 nodes are unavailable: 1 node(s) pod number exceeded, 3 Insufficient nvidia.com/gpu.",
        "In hyperNode s0: 0/4 nodes are unavailable: 1 node(s) pod number exceeded, 3 Insufficient nvidia.com/gpu.",
    ],
)
def test_volcano_per_node_fit_errors_read_like_the_schedulers(message):
    d = parse_scheduling_message(message)
    assert d.recognised and d.total_nodes == 4
    assert [(r.reason, r.nodes) for r in d.reasons] == [
        ("Too many pods", 1),
        ("Insufficient nvidia.com/gpu", 3),
    ]
    assert (
        explain(d, gpus=8) == "no node fits (4 tried): 1 node is full (pod count); 3 nodes lack 8 free GPUs"
    )


def test_a_volcano_pod_that_fits_waits_for_its_gang():
    d = parse_scheduling_message(
        "Pod ml/train-worker-0 can possibly be assigned to gpu-3, once minAvailable is satisfied"
    )
    assert d.recognised
    assert [r.reason for r in d.reasons] == ["waits for its gang"]
    assert explain(d) == "fits on node gpu-3 but waits for the rest of its gang to fit"


@pytest.mark.parametrize(
    "message",
    [
        "9999999999/1 tasks in gang unschedulable: pod group is not ready, " + "9" * 5000 + " minAvailable",
        "1/1 tasks in gang unschedulable: pod group is not ready, . Origin reason is x: "
        + "1/1 tasks in gang unschedulable: pod group is not ready, . Origin reason is x: " * 20,
        "minCount (" + "9" * 5000 + ") cannot be satisfied",
        "minCount (4) cannot be satisfied; pod group preemption: found a placement for podgroup, preempting "
        + "9" * 5000
        + " victims",
        "Pod " + "x" * 2000 + " can possibly be assigned to",
        (
            "3/4 tasks in gang unschedulable: pod group is not ready, 3 Pending, 4 minAvailable; Pending: "
            * 20
        )[:1020]
        + " ...",
    ],
)
def test_hostile_gang_messages_never_raise(message):
    d = parse_scheduling_message(message)
    assert isinstance(explain(d), str)
