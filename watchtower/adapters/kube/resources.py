"""The API collections Watchtower lists and watches, cluster-wide: the watched kinds of domain/kinds.py."""

from __future__ import annotations

from dataclasses import dataclass

from watchtower.domain.kinds import WATCHED, Kind


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str  # the name the Ingestor knows the objects by
    path: str  # cluster-wide collection path
    optional: bool = False  # a CRD that may not be installed: 404 means "absent", not an error

    @classmethod
    def of(cls, kind: Kind) -> Resource:
        """Return the collection that serves a kind."""
        return cls(kind.name, kind.path, kind.optional)


RESOURCES: tuple[Resource, ...] = tuple(Resource.of(k) for k in WATCHED)
