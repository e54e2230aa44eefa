"""The scheduler's FailedScheduling / PodScheduled=False wording, as several Kubernetes versions write it."""

from __future__ import annotations

import pytest

from watchtower.domain.messages import PreemptionVerdict, explain, parse_scheduling_message


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
