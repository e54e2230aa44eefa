"""The API collections Watchtower lists and watches, cluster-wide."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str  # the name the Ingestor knows the objects by
    path: str  # cluster-wide collection path
    optional: bool = False  # a CRD that may not be installed: 404 means "absent", not an error


RESOURCES: tuple[Resource, ...] = (
    Resource("Pod", "/api/v1/pods"),
    Resource("Event", "/api/v1/events"),
    Resource("Node", "/api/v1/nodes"),
    Resource("Namespace", "/api/v1/namespaces"),
    Resource("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses"),
    Resource("ResourceQuota", "/api/v1/resourcequotas"),
    Resource("PaddleJob", "/apis/batch.paddlepaddle.org/v1/paddlejobs", optional=True),
)
