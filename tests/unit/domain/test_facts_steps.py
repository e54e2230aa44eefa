"""A queue form adds to a workload's facts by registering a step in its slice (`QueueForm.facts`):
queue_facts.py runs whatever `registry.FORMS` registers, with no line of its own per form."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.unit.domain.helpers import GPU_FULL, NS, POLICY, T0, pending_pod, pod, state_of
from watchtower.domain import kinds
from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsPass, FactsStep
from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.messages.scheduler import parse_scheduling_message
from watchtower.domain.queue import QueueEvaluator, WorkloadState
from watchtower.domain.queue_facts import workload_facts
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey

HELD = WorkloadKey(NS, "Sleeper", "nap")  # a kind no other form knows


class _SleeperPass(FactsPass):
    """Holds its workload with no pod, and says so; with pods, only adds its entry."""

    __slots__ = ()

    def holds(self) -> bool:
        return True

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        if not draft.tracked:
            draft.state, draft.since, draft.why = WorkloadState.PENDING, T0, "asleep until the bell"
            draft.source = "sleeper"
        draft.form_facts["sleeper"] = {"bell": "09:00", "pods_seen": len(draft.tracked)}


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
    return _SleeperPass() if draft.key.kind == "Sleeper" or draft.tracked else None


# After every registered stage: the last word.
SLEEPER = QueueForm("sleeper", (kinds.JOB,), "a throwaway form for this test", facts=FactsStep(99, _begin))


def _facts(state: ClusterState, key: WorkloadKey, pods=()):
    return workload_facts(
        state, key, list(pods), None, T0 + 60, Counter(), policy=POLICY, diagnose=parse_scheduling_message
    )


@pytest.fixture
def sleeper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, SLEEPER))


def test_without_the_form_a_workload_with_no_pod_has_no_facts():
    assert _facts(ClusterState(), HELD) is None


@pytest.mark.usefixtures("sleeper")
def test_a_registered_form_holds_a_workload_with_no_pod_and_adds_its_entry():
    f = _facts(ClusterState(), HELD)
    assert f is not None
    assert f.state is WorkloadState.PENDING
    assert f.since == T0
    assert f.why == "asleep until the bell"
    assert f.source == "sleeper"
    assert f.form_facts == {"sleeper": {"bell": "09:00", "pods_seen": 0}}
    assert (f.pods_pending, f.pods_running, f.gpus_requested) == (0, 0, 0)
    # The evaluator's own path for one workload reads the same registry.
    w = QueueEvaluator(POLICY).status_of(ClusterState(), HELD, now=T0 + 60)
    assert w is not None and w.waiting and w.wait_seconds == 60
    assert w.facts.form_facts == f.form_facts


@pytest.mark.usefixtures("sleeper")
def test_a_registered_form_refines_after_the_pods_and_leaves_their_facts_alone():
    obj = pending_pod("p", message=GPU_FULL)
    state = state_of(obj)
    key = WorkloadKey(NS, "Pod", "p")
    with_form = _facts(state, key, [pod(obj)])
    assert with_form is not None
    assert with_form.form_facts == {"sleeper": {"bell": "09:00", "pods_seen": 1}}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(registry, "FORMS", tuple(f for f in registry.FORMS if f is not SLEEPER))
        without = _facts(state, key, [pod(obj)])
    assert without is not None and without.form_facts == {}
    assert with_form.state is WorkloadState.PENDING
    assert with_form.why == without.why
    assert with_form.since == without.since


def test_the_existing_forms_add_nothing_to_form_facts():
    obj = pending_pod("p", message=GPU_FULL)
    f = _facts(state_of(obj), WorkloadKey(NS, "Pod", "p"), [pod(obj)])
    assert f is not None and f.form_facts == {}


def test_every_form_with_facts_has_its_step_in_its_slice():
    for form in registry.FORMS:
        if form.facts is not None:
            assert form.facts.begin.__module__ == f"watchtower.domain.forms.{form.name}.facts"


class _Bell:
    """A throwaway form's workloads with no pod: held while the bell has not rung (`ringing`)."""

    def __init__(self) -> None:
        self.keys: set[WorkloadKey] = {HELD}
        self.ringing = False

    def held(self, state: object) -> set[WorkloadKey]:
        return self.keys

    def may_wait(self, state: object, key: WorkloadKey) -> bool:
        return key in self.keys and not self.ringing


def test_the_evaluator_lists_what_a_registered_form_holds_with_no_pod(monkeypatch: pytest.MonkeyPatch):
    """The evaluator finds a form's pod-less work through the registry (`FactsStep.pod_less`), on a first
    evaluation and on a later one that re-derives only what changed, with no line of queue.py per form."""
    from watchtower.domain.facts_draft import PodLess

    bell = _Bell()
    step = FactsStep(99, _begin, pod_less=PodLess(bell.held, bell.may_wait))
    monkeypatch.setattr(
        registry, "FORMS", (*registry.FORMS, QueueForm("bell", (kinds.JOB,), "a test", facts=step))
    )
    state, ev = ClusterState(), QueueEvaluator(POLICY)
    first = ev.evaluate(state, now=T0 + 60)
    assert [(w.key, w.why) for w in first.waiting()] == [(HELD, "asleep until the bell")]
    assert ev.evaluate(state, now=T0 + 120, include_running=True).workloads[0].key == HELD
    # The bell rings: once the workload is touched, the next evaluation drops it.
    bell.ringing = True
    state.log.touch(HELD)
    assert ev.evaluate(state, now=T0 + 180).waiting() == []
