"""The API collections Watchtower lists and watches, cluster-wide: the watched kinds of domain/kinds.py."""

from __future__ import annotations

from dataclasses import dataclass

from watchtower.domain.forms.registry import WATCHED
from watchtower.domain.kinds import Kind


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str  # the name the Ingestor knows the objects by
    path: str  # cluster-wide collection path
    optional: bool = False  # a CRD that may not be installed: 404 means "absent", not an error
    # The same kind at older versions, tried in turn when `path` is not served (an alpha API that moved).
    fallback_paths: tuple[str, ...] = ()

    @classmethod
    def of(cls, kind: Kind) -> Resource:
        """Return the collection that serves a kind (and its older versions, for discovery)."""
        older = tuple(kind.path_of(v) for v in kind.fallback_versions)
        return cls(kind.name, kind.path, kind.optional, older)

    @property
    def paths(self) -> tuple[str, ...]:
        """Return every path the kind may be served at, the preferred one first."""
        return (self.path, *self.fallback_paths)


RESOURCES: tuple[Resource, ...] = tuple(Resource.of(k) for k in WATCHED)
