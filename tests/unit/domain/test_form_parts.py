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
