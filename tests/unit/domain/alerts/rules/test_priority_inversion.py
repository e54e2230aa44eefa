"""WorkloadPriorityInversion: urgent work waits while lower-tier pods hold GPUs it could use, and
preemption will not free them."""

from __future__ import annotations

import dataclasses
import random

import pytest

from tests.unit.domain.alerts.builders import (
    HOUR,
    MINUTE,
    WARN_AFTER,
    holder,
    key,
    names,
    node,
    rule_input,
    settings,
    snapshot,
    workload,
)
from watchtower.domain.alerts.rules import priority_inversion
from watchtower.domain.alerts.rules.base import GpuHolder, HolderChanges
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue import WorkloadState, WorkloadStatus
from watchtower.domain.workloads import WorkloadKey

NAME = "WorkloadPriorityInversion"
FULL = [node("gpu-0", gpus=8, used=8), node("gpu-1", gpus=8, used=8)]


def urgent(*, tier="high", wait=20 * MINUTE, verdict=PreemptionVerdict.POLICY_NEVER, **kw):
    """A workload needing 8 GPUs per pod whose preemption cannot help."""
    return workload("serve", tier=tier, wait=wait, gpus=8, preemption=verdict, **kw)


def fire(w, holders, *, nodes=FULL, **changes):
    inp = rule_input(snapshot(w, nodes=nodes), holders=holders, rule_settings=settings(**changes))
    return priority_inversion.evaluate(inp)


def test_the_alert_names_the_lower_tier_workload_holding_the_gpus():
    (a,) = fire(urgent(), [holder("batch-eval", "gpu-0", 8, tier="low")])
    assert names([a]) == [(NAME, "warning")]
    assert a.labels["workload"] == "serve"
    assert a.annotations["summary"] == (
        "PaddleJob vision/serve (high) waits 20m while lower-tier nlp/PaddleJob/batch-eval holds 8 GPU(s) it could use"
    )
    assert (a.annotations["blocker"], a.annotations["blocker_tier"]) == ("nlp/PaddleJob/batch-eval", "low")
    assert (
        "Lower-tier workloads hold GPUs on nodes where it would fit: nlp/PaddleJob/batch-eval (8 GPU, tier low)."
        in (a.annotations["description"])
    )


def test_the_description_keeps_the_kubernetes_names_of_why_preemption_cannot_help():
    (a,) = fire(urgent(verdict=PreemptionVerdict.POLICY_NEVER), [holder("batch-eval", "gpu-0", 8)])
    assert "Preemption cannot help: its preemptionPolicy is Never, so" in a.annotations["description"]


def test_it_is_critical_for_the_top_tier_and_a_warning_below():
    blocker = [holder("batch-eval", "gpu-0", 8, tier="low")]
    assert names(fire(urgent(tier="critical"), blocker)) == [(NAME, "critical")]
    assert names(fire(urgent(tier="high"), blocker)) == [(NAME, "warning")]


@pytest.mark.parametrize(
    ("verdict", "fires"),
    [
        (PreemptionVerdict.POLICY_NEVER, True),
        (PreemptionVerdict.NO_VICTIMS, True),
        (PreemptionVerdict.NOT_HELPFUL, True),
        (PreemptionVerdict.POSSIBLE, False),  # the scheduler is already evicting for it
        (PreemptionVerdict.UNKNOWN, False),
    ],
)
def test_only_work_that_preemption_cannot_help_is_an_inversion(verdict, fires):
    alerts = fire(urgent(verdict=verdict), [holder("batch-eval", "gpu-0", 8)])
    assert len(alerts) == (1 if fires else 0)
    if fires:
        assert alerts[0].annotations["preemption"] == verdict.value


def test_it_waits_for_the_tiers_warn_after_first():
    blocker = [holder("batch-eval", "gpu-0", 8)]
    assert fire(urgent(wait=WARN_AFTER["high"] - 1), blocker) == []
    assert len(fire(urgent(wait=WARN_AFTER["high"]), blocker)) == 1


def test_only_the_configured_tiers_are_watched_for_inversion():
    w = urgent(tier="medium", wait=HOUR)
    blocker = [holder("batch-eval", "gpu-0", 8, tier="low")]
    assert fire(w, blocker) == []
    assert len(fire(w, blocker, inversion_tiers=frozenset({"medium"}))) == 1


@pytest.mark.parametrize("tier", ["critical", "high"])
def test_gpus_held_by_the_same_or_a_higher_tier_are_no_inversion(tier):
    assert fire(urgent(tier="high"), [holder("other", "gpu-0", 8, tier=tier)]) == []


def test_gpus_that_would_not_make_it_fit_on_their_node_do_not_count():
    small = [holder("batch-eval", "gpu-0", 4)]
    assert fire(urgent(), small) == []  # 4 held + 0 free < 8 needed
    half_free = [node("gpu-0", gpus=8, used=4), node("gpu-1", gpus=8, used=8)]
    assert len(fire(urgent(), small, nodes=half_free)) == 1  # 4 held + 4 free


def test_gpus_on_a_cordoned_node_do_not_count():
    cordoned = [node("gpu-0", gpus=8, used=8, schedulable=False)]
    assert fire(urgent(), [holder("batch-eval", "gpu-0", 8)], nodes=cordoned) == []


def test_the_biggest_holder_is_named_first_and_a_long_list_is_cut_at_five():
    nodes = [node(f"gpu-{i}", gpus=8, used=8) for i in range(7)]
    holders = [holder(f"small-{i}", f"gpu-{i}", 8, tier="medium") for i in range(6)]
    holders.append(holder("big", "gpu-6", 8, tier="low"))
    holders.append(holder("big", "gpu-5", 8, tier="low"))  # shares gpu-5 with small-5: both count
    (a,) = fire(urgent(tier="critical"), holders, nodes=nodes)
    assert a.annotations["blocker"] == "nlp/PaddleJob/big"
    assert "holds 16 GPU(s)" in a.annotations["summary"]
    assert "and 2 more." in a.annotations["description"]


@pytest.mark.parametrize("state", [WorkloadState.QUOTA_BLOCKED, WorkloadState.GATED, WorkloadState.RUNNING])
def test_work_that_is_not_in_the_scheduling_queue_is_no_inversion(state):
    assert fire(urgent(state=state, wait=HOUR), [holder("batch-eval", "gpu-0", 8)]) == []


def test_the_tick_lists_gpu_holders_only_when_an_urgent_workload_is_stuck():
    """Listing holders walks every bound pod (over a second at 150,000): the queue tracker asks this first."""
    tiers = frozenset({"critical", "high"})
    assert priority_inversion.needs_holders(snapshot(urgent()), tiers)
    assert not priority_inversion.needs_holders(snapshot(urgent(tier="low")), tiers)
    assert not priority_inversion.needs_holders(snapshot(urgent(wait=WARN_AFTER["high"] - 1)), tiers)
    assert not priority_inversion.needs_holders(snapshot(urgent(verdict=PreemptionVerdict.POSSIBLE)), tiers)
    assert not priority_inversion.needs_holders(snapshot(), tiers)
    # What the gate lets through is exactly what the rule can alert on.
    assert fire(urgent(), [holder("batch-eval", "gpu-0", 8, tier="low")])


class CountedHolders(list):
    """The holders of a tick, counting how often the rule walks them."""

    walks = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


def test_each_stuck_workload_names_its_own_blockers_from_one_read_of_the_holders():
    """A stall of thousands of urgent workloads over 90,000 holders was one walk each (minutes on the
    event loop); the rule now reads them once and looks each workload's blockers up by tier and size."""
    nodes = [node("gpu-0", gpus=8, used=8), node("gpu-1", gpus=8, used=8), node("gpu-2", gpus=8, used=4)]
    holders = CountedHolders(
        [
            holder("big", "gpu-0", 8, tier="low"),
            holder("mid", "gpu-1", 4, tier="high"),
            holder("small", "gpu-2", 2, tier="medium"),
        ]
    )
    stuck = [
        workload("serve-a", tier="critical", wait=HOUR, gpus=8, preemption=PreemptionVerdict.NOT_HELPFUL),
        workload("serve-b", tier="critical", wait=HOUR, gpus=8, preemption=PreemptionVerdict.NO_VICTIMS),
        workload("serve-c", tier="high", wait=HOUR, gpus=4, preemption=PreemptionVerdict.POLICY_NEVER),
    ]
    inp = rule_input(snapshot(*stuck, nodes=nodes), holders=holders, rule_settings=settings())
    alerts = priority_inversion.evaluate(inp)
    assert holders.walks == 1
    described = {
        a.labels["workload"]: a.annotations["description"].split("would fit: ")[1].split(". ")[0]
        for a in alerts
    }
    assert described == {
        # 8 needed: mid's 4 on a full node would not do; small's 2 beside 4 free would not either
        "serve-a": "nlp/PaddleJob/big (8 GPU, tier low)",
        "serve-b": "nlp/PaddleJob/big (8 GPU, tier low)",
        # 4 needed: mid is its own tier, small's 2 beside 4 free would fit it
        "serve-c": "nlp/PaddleJob/big (8 GPU, tier low), nlp/PaddleJob/small (2 GPU, tier medium)",
    }


def test_the_kept_index_finds_what_a_full_evaluation_finds_over_a_random_run_of_changes():
    """The service keeps the rule's blockers from tick to tick (`BlockerIndex`) and moves them by what
    changed; over 400 seeded random ticks of holders starting, growing, moving and finishing, nodes filling,
    emptying and being cordoned, and stuck workloads coming and going, every tick's alerts equal those of
    the rule evaluated from scratch. The ticks hand on which workloads' records changed, as the tracker's
    HolderIndex does, except some that do not say (the index then compares the holders themselves) and
    some the index does not see (as when nothing was stuck: the next change it is given does not follow)."""
    rnd = random.Random(34)
    tiers = ["critical", "high", "medium", "low"]
    verdicts = [PreemptionVerdict.POLICY_NEVER, PreemptionVerdict.NO_VICTIMS, PreemptionVerdict.NOT_HELPFUL]
    node_names = [f"gpu-{i}" for i in range(10)]
    nodes = {n: node(n, gpus=8, used=rnd.randrange(9)) for n in node_names}
    # (workload name, node) → its record, kept as the tracker's holder index keeps it: the same object until
    # that workload's pods change, so the index sees most records unchanged from one tick to the next.
    records: dict[tuple[str, str], GpuHolder] = {}
    stuck: dict[str, WorkloadStatus] = {}
    index = priority_inversion.BlockerIndex()
    holders: tuple[GpuHolder, ...] = ()
    fired_at_all = 0
    generation = 0
    since_tuple: set[str] = set()  # workloads whose records changed since the last tuple was handed on
    for step in range(400):
        for _ in range(rnd.randrange(4)):
            what = rnd.random()
            if what < 0.45:  # a holder starts or changes on some node (a new record for that workload)
                name, n = f"w{rnd.randrange(25)}", rnd.choice(node_names)
                records[(name, n)] = holder(name, n, rnd.randrange(1, 9), tier=rnd.choice(tiers))
                since_tuple.add(name)
            elif what < 0.6 and records:  # a holder's pods on one node finish
                gone = rnd.choice(sorted(records))
                del records[gone]
                since_tuple.add(gone[0])
            elif what < 0.85:  # a node's free GPUs change, or it is cordoned or uncordoned
                n = rnd.choice(node_names)
                nodes[n] = node(n, gpus=8, used=rnd.randrange(9), schedulable=rnd.random() > 0.15)
            else:  # an urgent workload gets stuck (some hold GPUs themselves: they never block themselves)
                name = f"w{rnd.randrange(25)}" if rnd.random() < 0.3 else f"s{rnd.randrange(12)}"
                stuck[name] = workload(
                    name,
                    ns="nlp",
                    tier=rnd.choice(["critical", "high"]),
                    wait=2 * HOUR,
                    gpus=rnd.choice([1, 2, 4, 8]),
                    preemption=rnd.choice(verdicts),
                )
        if rnd.random() < 0.1 and stuck:
            del stuck[rnd.choice(sorted(stuck))]
        generation += 1
        changed: dict[WorkloadKey, tuple[GpuHolder, ...]] = {}
        if rnd.random() < 0.8:  # most ticks hand on a new tuple; some the very same one (nothing moved)
            holders = tuple(records[k] for k in sorted(records))
            changed = {
                key(n, ns="nlp"): tuple(records[k] for k in sorted(records) if k[0] == n) for n in since_tuple
            }
            since_tuple = set()
        told = HolderChanges(generation - 1, generation, changed) if rnd.random() < 0.9 else None
        inp = dataclasses.replace(
            rule_input(snapshot(*stuck.values(), nodes=nodes.values()), holders=holders), holder_changes=told
        )
        full = priority_inversion.evaluate(inp)
        if rnd.random() < 0.05:
            continue  # a tick the index does not see
        kept = priority_inversion.evaluate(inp, index)
        assert [(a.labels, a.annotations) for a in kept] == [(a.labels, a.annotations) for a in full], step
        fired_at_all += len(full)
    assert fired_at_all > 400  # the run is not one where nothing ever fires


def test_a_workload_listed_twice_on_one_node_is_added_up_with_the_index_too():
    """Hand-made input may list a workload's GPUs on one node twice: the kept index gives way to the full
    evaluation, which adds them up."""
    twice = [holder("batch-eval", "gpu-0", 4), holder("batch-eval", "gpu-0", 4)]
    inp = rule_input(snapshot(urgent(), nodes=FULL), holders=twice)
    (a,) = priority_inversion.evaluate(inp, priority_inversion.BlockerIndex())
    assert a.annotations["summary"] == priority_inversion.evaluate(inp)[0].annotations["summary"]
    assert "holds 8 GPU(s)" in a.annotations["summary"]
