"""The simulator's scheduler decisions, checked against kube-scheduler's default-profile rules (DESIGN §3).

Pods here are plain records handed to the real Scheduler: data, not mocks.
"""

import random
from dataclasses import dataclass

from watchtower.domain.messages.scheduler import PreemptionVerdict, parse_scheduling_message
from watchtower.simulator.scheduler import (
    Bind,
    Preempt,
    SchedNode,
    Scheduler,
    Unschedulable,
    fit_error,
    queue_order,
)

GI = 2**30


@dataclass(eq=False)
class P:
    name: str
    priority: int
    gpus: int
    node: str = ""
    created: float = 0.0
    start_time: float | None = None
    preemption_policy: str = "PreemptLowerPriority"
    nominated: str = ""
    terminating: bool = False
    cpu_millis: int = 1000
    memory_bytes: int = GI
    dra_gpus: int = 0  # asked through a ResourceClaim

    @property
    def uid(self) -> str:
        return "uid-" + self.name


def nodes(n: int, *, gpus: int = 8, cordoned: int = 0) -> list[SchedNode]:
    return [
        SchedNode(f"n{i}", gpus, 128_000, 768 * GI, 110, unschedulable=i >= n - cordoned) for i in range(n)
    ]


def sched(ns: list[SchedNode], pods: list[P]) -> Scheduler:
    s = Scheduler(ns, random.Random(1))
    s.load(pods)
    return s


def test_queue_order_is_priority_then_creation():
    a = P("a", 100, 1, created=1)
    b = P("b", 500, 1, created=5)
    c = P("c", 500, 1, created=3)
    assert [p.name for p in queue_order([a, b, c])] == ["c", "b", "a"]


def test_a_pod_that_fits_is_bound_at_once():
    s = sched(nodes(1), [P("x", 100, 6, node="n0")])
    assert s.schedule(P("y", 100, 2)) == Bind("n0")


def test_preemption_picks_the_node_whose_highest_victim_is_lowest():
    s = sched(
        nodes(2),
        [P("long", 300_000, 8, node="n0", start_time=1), P("batch", 100_000, 8, node="n1", start_time=1)],
    )
    d = s.schedule(P("debug", 1_000_000, 8))
    assert isinstance(d, Preempt)
    assert d.node == "n1"
    assert [v.name for v in d.victims] == ["batch"]


def test_preemption_prefers_the_node_with_fewer_victims_at_equal_priority():
    s = sched(
        nodes(2),
        [
            P("b1", 100_000, 4, node="n0", start_time=1),
            P("b2", 100_000, 4, node="n0", start_time=2),
            P("b3", 100_000, 8, node="n1", start_time=3),
        ],
    )
    d = s.schedule(P("exp", 500_000, 8))
    assert isinstance(d, Preempt)
    assert d.node == "n1"
    assert [v.name for v in d.victims] == ["b3"]


def test_victims_are_lowest_priority_first_and_unneeded_ones_are_added_back():
    s = sched(
        nodes(1),
        [
            P("batch-early", 100_000, 2, node="n0", start_time=1),
            P("batch-late", 100_000, 2, node="n0", start_time=2),
            P("long", 300_000, 4, node="n0", start_time=0),
        ],
    )
    d = s.schedule(P("debug", 1_000_000, 2))
    assert isinstance(d, Preempt)
    # Both batch pods are candidates; the one that started earlier is more important and is reprieved.
    assert [v.name for v in d.victims] == ["batch-late"]

    s = sched(
        nodes(1),
        [
            P("batch-early", 100_000, 2, node="n0", start_time=1),
            P("batch-late", 100_000, 2, node="n0", start_time=2),
            P("long", 300_000, 4, node="n0", start_time=0),
        ],
    )
    d = s.schedule(P("debug", 1_000_000, 4))
    assert isinstance(d, Preempt)
    assert sorted(v.name for v in d.victims) == ["batch-early", "batch-late"]


def test_preemption_policy_never_does_not_preempt_and_says_so():
    s = sched(nodes(2), [P("b0", 100_000, 8, node="n0"), P("b1", 100_000, 8, node="n1")])
    d = s.schedule(P("long", 300_000, 8, preemption_policy="Never"))
    assert d == Unschedulable(
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible due to preemptionPolicy=Never."
    )
    diag = parse_scheduling_message(d.message)
    assert diag.recognised and diag.preemption is PreemptionVerdict.POLICY_NEVER


def test_no_victims_and_not_helpful_use_the_real_grammar():
    s = sched(nodes(3, cordoned=1), [P("e0", 500_000, 8, node="n0"), P("e1", 500_000, 8, node="n1")])
    d = s.schedule(P("batch", 100_000, 2))
    assert d == Unschedulable(
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )
    diag = parse_scheduling_message(d.message)
    assert diag.recognised
    assert diag.total_nodes == 3
    assert diag.nodes_with("Insufficient nvidia.com/gpu") == 2
    assert diag.preemption is PreemptionVerdict.NO_VICTIMS


def test_a_pod_larger_than_any_node_is_told_preemption_cannot_help():
    s = sched(nodes(2), [P("b0", 100_000, 1, node="n0")])
    d = s.schedule(P("huge", 500_000, 16))
    assert isinstance(d, Unschedulable)
    assert d.message.endswith(
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert parse_scheduling_message(d.message).preemption is PreemptionVerdict.NOT_HELPFUL


def test_terminating_pods_still_hold_their_gpus():
    s = sched(nodes(1), [P("victim", 100_000, 8, node="n0", terminating=True)])
    d = s.schedule(P("other", 100_000, 1))
    assert isinstance(d, Unschedulable)
    assert "1 Insufficient nvidia.com/gpu" in d.message


def test_a_nominated_pod_waits_while_its_victims_terminate():
    s = sched(nodes(1), [P("victim", 100_000, 8, node="n0", terminating=True)])
    d = s.schedule(P("debug", 1_000_000, 8, nominated="n0"))
    assert d == Unschedulable(
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    assert parse_scheduling_message(d.message).preemption is PreemptionVerdict.POSSIBLE


def test_space_freed_for_a_nominated_pod_is_not_taken_by_a_lower_priority_one():
    debug = P("debug", 1_000_000, 8, nominated="n0")
    s = sched(nodes(1), [debug])
    assert isinstance(s.schedule(P("batch", 100_000, 4)), Unschedulable)
    assert s.schedule(debug) == Bind("n0")


def test_fit_error_sorts_the_counted_reasons_as_strings():
    msg = fit_error(
        12, {"a": ["Insufficient nvidia.com/gpu"], "b": ["Insufficient cpu", "Insufficient nvidia.com/gpu"]}
    )
    assert msg == "0/12 nodes are available: 1 Insufficient cpu, 2 Insufficient nvidia.com/gpu."
