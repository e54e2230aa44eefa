"""The CRDs the scenarios install: upstream's own YAML, copied into tests/fixtures/crds/ (see its README for
where each comes from; neither module is served by the Go module proxy here, so they cannot be read from
the module cache at test time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.e2e.api import Api, ApiError, wait_for

CRD_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "crds"

# CRD name: (file, a collection it serves, once Established)
CRDS: dict[str, tuple[str, str]] = {
    "paddlejobs.batch.paddlepaddle.org": (
        "batch.paddlepaddle.org_paddlejobs.yaml",
        "/apis/batch.paddlepaddle.org/v1/paddlejobs",
    ),
    "podgroups.scheduling.volcano.sh": (
        "scheduling.volcano.sh_podgroups.yaml",
        "/apis/scheduling.volcano.sh/v1beta1/podgroups",
    ),
    "queues.scheduling.volcano.sh": (
        "scheduling.volcano.sh_queues.yaml",
        "/apis/scheduling.volcano.sh/v1beta1/queues",
    ),
}


# Only for Volcano's own scheduler (capture_volcano.py): its cache waits on informers of these.
VOLCANO_SCHEDULER_CRDS: dict[str, tuple[str, str]] = {
    "hypernodes.topology.volcano.sh": (
        "topology.volcano.sh_hypernodes.yaml",
        "/apis/topology.volcano.sh/v1alpha1/hypernodes",
    ),
    "numatopologies.nodeinfo.volcano.sh": (
        "nodeinfo.volcano.sh_numatopologies.yaml",
        "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies",
    ),
    "nodeshards.shard.volcano.sh": (
        "shard.volcano.sh_nodeshards.yaml",
        "/apis/shard.volcano.sh/v1alpha1/nodeshards",
    ),
}


# Kueue v0.17.0's config/components/crd/bases, all of them: its manager starts informers on most kinds
# (admission checks, cohorts, topologies, MultiKueue's) whether or not a scenario uses them. v1beta2 is
# the storage version; the bases carry no conversion webhook, so v1beta1 is served without conversion.
KUEUE_CRDS: dict[str, tuple[str, str]] = {
    f"{plural}.kueue.x-k8s.io": (
        f"kueue/kueue.x-k8s.io_{plural}.yaml",
        f"/apis/kueue.x-k8s.io/v1beta2/{plural}",
    )
    for plural in (
        "admissionchecks",
        "clusterqueues",
        "cohorts",
        "localqueues",
        "multikueueclusters",
        "multikueueconfigs",
        "provisioningrequestconfigs",
        "resourceflavors",
        "topologies",
        "workloadpriorityclasses",
        "workloads",
    )
}


def load(name: str) -> dict[str, Any]:
    """Return the CRD `name` as upstream ships it (one document per file)."""
    file, _ = {**CRDS, **VOLCANO_SCHEDULER_CRDS, **KUEUE_CRDS}[name]
    docs = [d for d in yaml.safe_load_all((CRD_DIR / file).read_text()) if d]
    if len(docs) != 1 or docs[0].get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{file}: expected one CustomResourceDefinition, found {len(docs)} documents")
    crd: dict[str, Any] = docs[0]
    if crd["metadata"]["name"] != name:
        raise ValueError(f"{file} defines {crd['metadata']['name']}, not {name}")
    # controller-gen v0.6 writes `creationTimestamp: null`, and a status block the server fills itself.
    crd["metadata"].pop("creationTimestamp", None)
    crd.pop("status", None)
    return crd


def install(api: Api, crds: dict[str, tuple[str, str]] = CRDS) -> None:
    """Create the CRDs (already there is fine) and return once each one's collection is served."""
    for name in crds:
        try:
            api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", load(name))
        except ApiError as e:
            if e.status != 409:
                raise
    for name, (_, collection) in crds.items():
        wait_for(f"the {name} CRD served", lambda c=collection: api.get(c))
