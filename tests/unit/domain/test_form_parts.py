"""A queue form's state part comes from the registry: a new form binds its kinds with no line of state.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

import pytest

from watchtower.domain.binding import Binding
from watchtower.domain.change_log import ChangeLog
from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.kinds import Kind
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey

WIDGET = Kind("Widget", "example.com", "v1", "widgets", optional=True)


@dataclass(frozen=True)
class Widget:
    namespace: str
    name: str
    job: str  # the Job it holds back


class WidgetHost(Protocol):
    @property
    def log(self) -> ChangeLog: ...


@dataclass
class WidgetPart:
    """A throwaway form's part, its table inside it (not a field of ClusterState)."""

    host: WidgetHost
    widgets: dict[tuple[str, str], Widget] = field(default_factory=dict)

    def upsert(self, w: Widget) -> None:
        self.widgets[(w.namespace, w.name)] = w
        self.host.log.touch(WorkloadKey(w.namespace, "Job", w.job))

    def delete(self, w: Widget) -> None:
        if self.widgets.pop((w.namespace, w.name), None) is not None:
            self.host.log.touch(WorkloadKey(w.namespace, "Job", w.job))

    def bindings(self) -> dict[str, Binding[Any]]:
        key = attrgetter("namespace", "name")
        return {WIDGET.name: Binding(self.upsert, self.delete, self.widgets, key)}


WIDGETS = QueueForm("widgets", (WIDGET,), "a job a widget holds back", part=WidgetPart)


def _fed(st: ClusterState) -> WidgetPart:
    part = st.forms.by_name["widgets"]
    assert isinstance(part, WidgetPart) and part.host is st
    bound = st.bindings()[WIDGET.name]
    w = Widget("team-a", "w1", "train")
    bound.upsert(w)
    assert bound.held is part.widgets and dict(bound.held) == {("team-a", "w1"): w}
    assert st.log.changes == [WorkloadKey("team-a", "Job", "train")]
    assert bound.delete is not None
    bound.delete(w)
    assert part.widgets == {} and st.log.changes_end == 2
    return part


def test_a_registered_form_gets_its_part_and_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, WIDGETS))
    st = ClusterState()
    _fed(st)
    # Every kind the registered forms had is bound as before, beside the new one.
    assert st.bindings().keys() == ClusterState(queue_forms=registry.FORMS[:-1]).bindings().keys() | {
        "Widget"
    }


def test_the_forms_may_be_given() -> None:
    _fed(ClusterState(queue_forms=(*registry.FORMS, WIDGETS)))
    assert "widgets" not in ClusterState().forms.by_name


def test_a_part_must_bind_exactly_its_forms_kinds() -> None:
    other = QueueForm("other", (Kind("Gadget", "example.com", "v1", "gadgets"),), "", part=WidgetPart)
    st = ClusterState(queue_forms=(*registry.FORMS, other))
    with pytest.raises(ValueError, match="'other'"):
        st.bindings()


def test_a_kind_bound_twice_is_refused() -> None:
    pods = Kind("Pod", "", "v1", "pods")

    @dataclass
    class PodPart:
        host: object

        def bindings(self) -> dict[str, Binding[Any]]:
            return {"Pod": Binding(lambda p: None, None, None, attrgetter("uid"))}

    st = ClusterState(queue_forms=(*registry.FORMS, QueueForm("again", (pods,), "", part=PodPart)))
    with pytest.raises(ValueError, match="bound twice"):
        st.bindings()


def test_a_forms_facts_step_reads_its_own_part_and_the_evaluator_lists_what_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole of a new form in the domain: its part keeps its table, its facts step reads that part
    (`FactsState.forms.by_name`) and holds the Job a widget holds back with no pod; nothing in state.py,
    queue_facts.py, queue.py or facts_draft.py names it."""
    from tests.unit.domain.helpers import POLICY, T0
    from watchtower.domain.facts_draft import (
        FactsContext,
        FactsDraft,
        FactsPass,
        FactsState,
        FactsStep,
        PodLess,
    )
    from watchtower.domain.queue import QueueEvaluator, WorkloadState

    def part_of(state: FactsState) -> WidgetPart:
        part = state.forms.by_name["widgets"]
        assert isinstance(part, WidgetPart)
        return part

    def held(state: FactsState) -> set[WorkloadKey]:
        return {WorkloadKey(w.namespace, "Job", w.job) for w in part_of(state).widgets.values()}

    class Held(FactsPass):
        def holds(self) -> bool:
            return True

        def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
            names = sorted(w.name for w in part_of(ctx.state).widgets.values() if w.job == draft.key.name)
            draft.state, draft.since, draft.why = WorkloadState.PENDING, T0, f"held back by widget {names[0]}"
            draft.form_facts["widgets"] = names

    def begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
        return Held() if draft.key in held(ctx.state) else None

    step = FactsStep(70, begin, pod_less=PodLess(held, lambda state, key: key in held(state)))
    form = QueueForm("widgets", (WIDGET,), "a job a widget holds back", part=WidgetPart, facts=step)
    monkeypatch.setattr(registry, "FORMS", (*registry.FORMS, form))
    st, ev = ClusterState(), QueueEvaluator(POLICY)
    assert ev.evaluate(st, now=T0 + 60).waiting() == []
    st.bindings()[WIDGET.name].upsert(Widget("team-a", "w1", "train"))
    [w] = ev.evaluate(st, now=T0 + 60).waiting()
    assert (w.key, w.why, w.wait_seconds) == (
        WorkloadKey("team-a", "Job", "train"),
        "held back by widget w1",
        60,
    )
    assert w.facts.form_facts == {"widgets": ["w1"]}
