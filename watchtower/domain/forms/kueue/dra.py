"""The GPUs a Kueue Workload's pod sets ask through DRA claims, counted by the rules pods are (forms/dra/records.py).

A pod set's template may name claims in `spec.resourceClaims`: a `resourceClaimTemplateName` gives each of
its `count` pods a claim of its own made from the template, so its GPUs count once per pod; a
`resourceClaimName` is one claim its pods share, counted once for the Workload. Kueue v0.17 itself counts
only templates, and only with its alpha `DynamicResourceAllocation` gate and a `deviceClassMappings` entry
for the class (pkg/dra/claims.go); Watchtower counts what the pods will ask whatever Kueue is told.
"""

from __future__ import annotations

from collections.abc import Iterator

from watchtower.domain.forms.dra.records import GpuClaim, PodClaim, ResourceClaim
from watchtower.domain.forms.dra.tables import DraTables
from watchtower.domain.forms.kueue.records import KueueWorkload

# The id a Workload is indexed under among a claim's or template's users (pod uids never hold a "/").
_USER = "kueue-workload/"


def claim_user(namespace: str, name: str) -> str:
    """Return the id a Kueue Workload goes by among the users of the claims and templates it names."""
    return f"{_USER}{namespace}/{name}"


def workload_of_user(user: str) -> tuple[str, str] | None:
    """Return the (namespace, name) of a Workload's `claim_user` id; None for a pod's uid."""
    if not user.startswith(_USER):
        return None
    ns, _, name = user[len(_USER) :].partition("/")
    return ns, name


def all_claims(w: KueueWorkload) -> tuple[PodClaim, ...]:
    return tuple(pc for ps in w.dra.pod_sets for pc in ps.claims) if w.dra is not None else ()


def _source(dra: DraTables, namespace: str, pc: PodClaim) -> ResourceClaim | None:
    if pc.template:
        return dra.templates.get((namespace, pc.template))
    return dra.claims.get((namespace, pc.claim)) if pc.claim else None


def pod_set_gpus(dra: DraTables, w: KueueWorkload) -> tuple[int, int]:
    """Return (GPUs in all, the most one pod asks with its `nvidia.com/gpu`) its pod sets' claims ask;
    a template or claim not seen yet asks none until it comes."""
    total = most = 0
    shared: set[str] = set()
    for ps in w.dra.pod_sets if w.dra is not None else ():
        per_pod = own = 0
        for pc in ps.claims:
            c = _source(dra, w.namespace, pc)
            if c is None:
                continue
            n = dra.claim_gpus(c)[0]
            per_pod += n
            if pc.template:
                own += n
            elif pc.claim not in shared:
                shared.add(pc.claim)
                total += n
        total += own * ps.count
        most = max(most, per_pod + ps.gpus_per_pod)
    return total, most


def pod_set_gpu_claims(dra: DraTables, w: KueueWorkload) -> Iterator[GpuClaim]:
    """Yield its pod sets' claims that ask GPUs, as the JSON lists a workload's (`gpu_claims`): named
    `<pod set>/<claim entry>`, counting a template's GPUs for every pod of the set; none is allocated."""
    for ps in w.dra.pod_sets if w.dra is not None else ():
        for pc in ps.claims:
            c = _source(dra, w.namespace, pc)
            if c is None:
                continue
            n, _, cls = dra.claim_gpus(c)
            if n or cls:
                yield GpuClaim(f"{ps.name}/{pc.name}", cls, n * ps.count if pc.template else n, False)
