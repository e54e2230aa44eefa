"""What a queue form registers: its name, the kinds it watches and the hooks each layer reads.

A form is a slice: `domain/forms/<name>/` (its records, tables, state part, the facts it adds to a
workload and the JSON it presents), `adapters/kube/forms/<name>.py` (how its kinds decode) and, when
the demo shows it, `simulator/forms/<name>.py` (the controller that makes its objects). Every layer
finds a form's module by the form's name in the one list, `registry.FORMS`; start-up and
tests/architecture fail when a layer lacks a module a form needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from watchtower.domain.facts_draft import FactsStep
from watchtower.domain.kinds import Kind


@dataclass(frozen=True, slots=True)
class QueueForm:
    """One queue form: `name` names its module in every layer; `kinds` are its rows of domain/kinds.py."""

    name: str
    kinds: tuple[Kind, ...]
    summary: str  # one line: what waits in this form, for docs/architecture.md's table
    # Its step of a workload's facts (queue_facts.py runs the registered steps): None, it adds none.
    facts: FactsStep | None = None
