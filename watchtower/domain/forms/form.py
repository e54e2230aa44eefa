"""What a queue form registers: its name, the kinds it watches and the hooks each layer reads.

A form is a slice: `domain/forms/<name>/` (its records, tables, state part, the facts it adds to a
workload and the JSON it presents), `adapters/kube/forms/<name>.py` (how its kinds decode) and, when
the demo shows it, `simulator/forms/<name>.py` (the controller that makes its objects). Every layer
finds a form's module by the form's name in the one list, `registry.FORMS`; start-up and
tests/architecture fail when a layer lacks a module a form needs. A form whose objects change more than
the pods and controllers registers its state part (`part`): `ClusterState` builds one per form from the
registry and binds its kinds through the part's `bindings()`, so that a new form adds its part, with its
tables inside, and no line of state.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from watchtower.domain.binding import Binding
from watchtower.domain.facts_draft import FactsStep
from watchtower.domain.kinds import Kind
from watchtower.domain.queue_values import WorkloadStatus


class FormPart(Protocol):
    """A form's part of the cluster state: it applies the objects of the form's kinds (to tables of its own,
    or the state's) and says how each kind reaches it."""

    def bindings(self) -> dict[str, Binding[Any]]: ...


@dataclass(frozen=True, slots=True)
class QueueForm:
    """One queue form: `name` names its module in every layer; `kinds` are its rows of domain/kinds.py."""

    name: str
    kinds: tuple[Kind, ...]
    summary: str  # one line: what waits in this form, for docs/architecture.md's table
    # Makes the form's part of a `ClusterState`, given that state: None for a form whose kinds the state's
    # own parts hold (pods, controllers). The state is `Any` here because this module is imported by
    # state.py (through the registry); each part types what it reads of it with a host Protocol.
    part: Callable[[Any], FormPart] | None = None
    # Its keys of a workload's JSON, in order. services/queue_json.py puts them after the common keys (after
    # "pods_existing"), form after form in the registry's order, so a form's keys stay where docs/json.md
    # lists them. A new form reads what it added from `w.facts.form_facts[name]`.
    workload_json: Callable[[WorkloadStatus], dict[str, Any]] | None = None
    # Its sections of the queue document (`analyze`, /api/v1/queue), in order, from the cluster state at `now`
    # (seconds). The state is typed `Any` here: the state imports this registry; each presenter names what
    # it reads with a Protocol. The queue tracker presents them once per tick (`Tick.form_sections`).
    queue_json: Callable[[Any, float], dict[str, Any]] | None = None
    # Where a workload's wait was read from, in the words of the objects users know ("Kueue Workload w in
    # ClusterQueue q"), from its JSON; None when its `source` is not this form's. The pages ask each form
    # (api/wait_source.py); its pods' PodScheduled condition is said when none claims the source.
    read_from: Callable[[Mapping[str, Any]], str | None] | None = None
    # Its step of a workload's facts (queue_facts.py runs the registered steps): None, it adds none.
    facts: FactsStep | None = None
    # The shape of `workload_json`'s keys: a TypedDict, described key by key (domain/forms/shapes.py). The
    # API's `Workload` model declares them (api/schemas/workload.py), so /openapi.json documents them and a
    # key presented but not declared fails the tests. A TypedDict class has no type to name but `type`.
    workload_shape: type | None = None
    # The shape of `queue_json`'s sections, a TypedDict, for the API's `Queue` and the `analyze` document.
    queue_shape: type | None = None
