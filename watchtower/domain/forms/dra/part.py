"""The DRA form's part of the state: DeviceClasses, ResourceClaims, their templates, ResourceSlices.

Applies their objects to the DRA tables (tables.py) and has the state re-count the GPUs of the pods
and Kueue Workloads whose claims they change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

from watchtower.domain import kinds
from watchtower.domain.binding import Binding
from watchtower.domain.forms.dra.records import DeviceClass, ResourceClaim, ResourceSlice
from watchtower.domain.forms.dra.tables import DraTables

_ns_name = attrgetter("namespace", "name")


class DraHost(Protocol):
    @property
    def dra(self) -> DraTables: ...
    def reread(self, uids: set[str]) -> None: ...


@dataclass(slots=True)
class DraForm:
    host: DraHost

    def upsert_claim(self, c: ResourceClaim) -> None:
        self.host.reread(self.host.dra.upsert_claim(c))

    def delete_claim(self, c: ResourceClaim) -> None:
        self.host.reread(self.host.dra.delete_claim(c))

    def upsert_template(self, t: ResourceClaim) -> None:
        self.host.reread(self.host.dra.upsert_template(t))

    def delete_template(self, t: ResourceClaim) -> None:
        self.host.reread(self.host.dra.delete_template(t))

    def upsert_class(self, c: DeviceClass) -> None:
        self.host.reread(self.host.dra.upsert_class(c))

    def delete_class(self, c: DeviceClass) -> None:
        self.host.reread(self.host.dra.delete_class(c))

    def upsert_slice(self, s: ResourceSlice) -> None:
        self.host.reread(self.host.dra.upsert_slice(s))

    def delete_slice(self, s: ResourceSlice) -> None:
        self.host.reread(self.host.dra.delete_slice(s))

    def bindings(self) -> dict[str, Binding[Any]]:
        """Return the bindings of this form's kinds, by kind name."""
        t = self.host.dra
        name: Callable[[Any], Any] = attrgetter("name")
        return {
            kinds.DEVICE_CLASS.name: Binding(self.upsert_class, self.delete_class, t.classes, name),
            kinds.RESOURCE_SLICE.name: Binding(self.upsert_slice, self.delete_slice, t.slices, name),
            kinds.RESOURCE_CLAIM_TEMPLATE.name: Binding(
                self.upsert_template, self.delete_template, t.templates, _ns_name
            ),
            kinds.RESOURCE_CLAIM.name: Binding(self.upsert_claim, self.delete_claim, t.claims, _ns_name),
        }
