"""The queue forms' parts of the cluster state, built from the forms' registry.

`ClusterState` (state.py) holds one `FormParts`: each registered form that has a part (`QueueForm.part`)
gets one, made with the state as its host, and binds exactly its form's kinds. A new form's part, with
its tables inside, needs no line here nor in state.py; the gangs, DRA and Kueue parts are also named here,
typed, for the callers that drive them directly (`state.forms.kueue.set_positions`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from watchtower.domain.binding import Binding
from watchtower.domain.facts_draft import PodLess
from watchtower.domain.forms.dra.part import DraForm, DraHost
from watchtower.domain.forms.form import FormPart, QueueForm
from watchtower.domain.forms.gangs.part import GangForm, GangHost
from watchtower.domain.forms.kueue.part import KueueForm, KueueHost


class PartsHost(GangHost, DraHost, KueueHost, Protocol):
    """What the named parts read of the state: typed here so that mypy still checks `ClusterState` against
    them, which the registry's factories (`QueueForm.part`, taking Any) do not."""


@dataclass(slots=True)
class FormParts:
    """The state's part for each registered form that has one (`QueueForm.part`), by form name. The parts of
    the gangs, DRA and Kueue forms are also named, typed, for the callers that drive them directly."""

    registered: tuple[QueueForm, ...]  # the forms with a part, in registry order
    by_name: dict[str, FormPart]
    gangs: GangForm
    dra: DraForm
    kueue: KueueForm
    # How each form holds work with no pod (every registered form's, with a part or not).
    pod_less: tuple[PodLess, ...] = ()

    @classmethod
    def built(cls, host: PartsHost, forms: tuple[QueueForm, ...]) -> FormParts:
        """Return each form's part of `host`, made by the factory the form registers, in registry order."""
        with_part = tuple(f for f in forms if f.part is not None)
        by_name = {f.name: f.part(host) for f in with_part if f.part is not None}
        return cls(
            with_part,
            by_name,
            _part_of(by_name, "gangs", GangForm),
            _part_of(by_name, "dra", DraForm),
            _part_of(by_name, "kueue", KueueForm),
            tuple(f.facts.pod_less for f in forms if f.facts is not None and f.facts.pod_less is not None),
        )

    def bindings(self) -> dict[str, Binding[Any]]:
        """Return each part's bindings, by kind name; raise ValueError for a part that binds other kinds
        than its form's (a kind it misses would never reach it; one it adds, the decoder does not read)."""
        out: dict[str, Binding[Any]] = {}
        for f in self.registered:
            bound = self.by_name[f.name].bindings()
            declared = {k.name for k in f.kinds}
            if bound.keys() != declared:
                raise ValueError(
                    f"form {f.name!r}'s part binds {sorted(bound)}, its kinds are {sorted(declared)}"
                )
            out.update(bound)
        return out


_P = TypeVar("_P")


def _part_of(parts: dict[str, FormPart], name: str, cls: type[_P]) -> _P:
    part = parts.get(name)
    if not isinstance(part, cls):
        raise TypeError(f"the {name!r} form registers no {cls.__name__} part (got {part!r})")
    return part
