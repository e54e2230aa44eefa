"""The DRA objects a `ClusterState` holds, the GPUs each pod asks through them, and GPU capacity per node.

Kept apart from state.py, which is about pods: an upsert here returns the uids of the pods whose GPU
count may have changed (the pods that name the claim or the template), and the state re-reads them.
Pods, claims and slices arrive on separate watches in any order; a pod whose claim is not seen yet
counts its template's requests, or none, until the claim arrives.

Size: just over 400 lines because claims, templates, slices and device classes index each other (a pod
names claims or templates, a claim a class, slices give each node its devices); split, every upsert
would have to reach across modules to say which pods to re-read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from watchtower.domain.forms.dra.records import (
    ALL,
    CLAIM_DELETING,
    CLAIM_MISSING,
    CLASS_MISSING,
    GPU_DEVICE_CLASS,
    TEMPLATE_MISSING,
    DeviceClass,
    DeviceRequest,
    GpuClaim,
    PodClaim,
    ResourceClaim,
    ResourceSlice,
    matches,
)

NsName = tuple[str, str]
# The pods naming a claim or template: nearly always one, kept as its uid (a set of one costs 200 bytes
# more, per claim); a set only when several share it.
Users = str | set[str]


def _each(users: Users | None) -> Iterable[str]:
    if users is None:
        return ()
    return (users,) if isinstance(users, str) else users


def _add(table: dict[NsName, Users], key: NsName, uid: str) -> None:
    users = table.get(key)
    if users is None:
        table[key] = uid
    elif isinstance(users, str):
        if users != uid:
            table[key] = {users, uid}
    else:
        users.add(uid)


def _discard(table: dict[NsName, Users], key: NsName, uid: str) -> None:
    users = table.get(key)
    if users is None:
        return
    if isinstance(users, str):
        if users == uid:
            del table[key]
        return
    users.discard(uid)
    if len(users) == 1:
        table[key] = next(iter(users))
    elif not users:
        del table[key]


@dataclass(slots=True)
class DraTables:
    gpu_classes: frozenset[str] = frozenset({GPU_DEVICE_CLASS})
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[NsName, ResourceClaim] = field(default_factory=dict)
    templates: dict[NsName, ResourceClaim] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    # Which pods name a claim or a template, so that a change re-reads only them.
    claim_users: dict[NsName, Users] = field(default_factory=dict)
    template_users: dict[NsName, Users] = field(default_factory=dict)
    # Bumped by every change of what pods name or of the claims, templates and classes: `unresolved`
    # is recomputed only then.
    version: int = 0
    _unresolved: tuple[int, dict[str, tuple[str, str]]] | None = None
    # GPU-class devices per node and class, recomputed only after a slice or class changed.
    # The unallocated claims and templates asking `All` devices (True: a template), whose count follows
    # the slices: a slice change re-reads only their pods, not every pod with a claim.
    _asks_all: set[tuple[bool, NsName]] = field(default_factory=set)
    # GPU-class devices of each slice, by class: a slice change recounts that slice only.
    _slice_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    _per_node: dict[str, dict[str, int]] | None = None
    _node_gpus: dict[str, int] | None = None
    # Each pool's part of `_per_node` and its slices' names: a republished slice recounts its pool only
    # (a driver republishing 1% of 2,000 slices made every tick recount all of them).
    _pool_part: dict[tuple[str, str], dict[str, dict[str, int]]] = field(default_factory=dict)
    _pool_slices: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    _dirty_pools: set[tuple[str, str]] = field(default_factory=set)
    _node_pools: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # the pools with devices there

    # ---- which pods name what ---------------------------------------------------------------------

    def saw_pod(self, uid: str, namespace: str, claims: tuple[PodClaim, ...], *, gone: bool = False) -> None:
        """Index (or, `gone`, forget) a pod under the claims and templates it names."""
        self.version += 1
        for pc in claims:
            for table, name in ((self.claim_users, pc.claim), (self.template_users, pc.template)):
                if not name:
                    continue
                if gone:
                    _discard(table, (namespace, name), uid)
                else:
                    _add(table, (namespace, name), uid)

    # ---- upserts: each returns the pods to re-read ----------------------------------------------------

    def upsert_claim(self, c: ResourceClaim) -> set[str]:
        key = (c.namespace, c.name)
        if self.claims.get(key) == c:
            return set()
        self.version += 1
        self.claims[key] = c
        self._note_all(False, key, c)
        return set(_each(self.claim_users.get(key)))

    def delete_claim(self, c: ResourceClaim) -> set[str]:
        key = (c.namespace, c.name)
        if self.claims.pop(key, None) is None:
            return set()
        self.version += 1
        self._asks_all.discard((False, key))
        return set(_each(self.claim_users.get(key)))

    def upsert_template(self, t: ResourceClaim) -> set[str]:
        key = (t.namespace, t.name)
        if self.templates.get(key) == t:
            return set()
        self.version += 1
        self.templates[key] = t
        self._note_all(True, key, t)
        return set(_each(self.template_users.get(key)))

    def delete_template(self, t: ResourceClaim) -> set[str]:
        key = (t.namespace, t.name)
        if self.templates.pop(key, None) is None:
            return set()
        self.version += 1
        self._asks_all.discard((True, key))
        return set(_each(self.template_users.get(key)))

    def upsert_class(self, c: DeviceClass) -> set[str]:
        if self.classes.get(c.name) == c:
            return set()
        self.classes[c.name] = c
        self.version += 1
        self._slice_counts.clear()
        self._per_node = self._node_gpus = None
        return self._all_count_users() if c.name in self.gpu_classes else set()

    def delete_class(self, c: DeviceClass) -> set[str]:
        if self.classes.pop(c.name, None) is None:
            return set()
        self.version += 1
        self._slice_counts.clear()
        self._per_node = self._node_gpus = None
        return self._all_count_users() if c.name in self.gpu_classes else set()

    def upsert_slice(self, s: ResourceSlice) -> set[str]:
        old = self.slices.get(s.name)
        if old == s:
            return set()
        if old is not None:
            self._unfile(old)
        self.slices[s.name] = s
        self._pool_slices.setdefault((s.driver, s.pool), set()).add(s.name)
        self._dirty_pools.add((s.driver, s.pool))
        self._slice_counts.pop(s.name, None)
        self._node_gpus = None
        return self._all_count_users()

    def delete_slice(self, s: ResourceSlice) -> set[str]:
        old = self.slices.pop(s.name, None)
        if old is None:
            return set()
        self._unfile(old)
        self._slice_counts.pop(s.name, None)
        self._node_gpus = None
        return self._all_count_users()

    def _unfile(self, s: ResourceSlice) -> None:
        pool = (s.driver, s.pool)
        names = self._pool_slices.get(pool)
        if names is not None:
            names.discard(s.name)
            if not names:
                del self._pool_slices[pool]
        self._dirty_pools.add(pool)

    def _note_all(self, template: bool, key: NsName, c: ResourceClaim) -> None:
        if not c.allocated and any(r.first.count == ALL for r in c.requests):
            self._asks_all.add((template, key))
        else:
            self._asks_all.discard((template, key))

    def _all_count_users(self) -> set[str]:
        """Return the pods whose unallocated claims ask `All` devices: their count follows the slices."""
        out: set[str] = set()
        for template, key in self._asks_all:
            out.update(_each((self.template_users if template else self.claim_users).get(key)))
        return out

    # ---- what a pod asks ----------------------------------------------------------------------------

    def _claim_of(self, namespace: str, pc: PodClaim) -> tuple[ResourceClaim | None, bool]:
        """Return the claim a pod names, else the template its claim will be made from (True)."""
        if pc.claim:
            c = self.claims.get((namespace, pc.claim))
            if c is not None:
                return c, False
        return (self.templates.get((namespace, pc.template)) if pc.template else None), True

    def _count(self, r: DeviceRequest) -> int:
        if r.device_class not in self.gpu_classes:
            return 0
        if r.count != ALL:
            return max(0, r.count)
        per_node = self.per_node()
        return max((n.get(r.device_class, 0) for n in per_node.values()), default=0)

    def claim_gpus(self, c: ResourceClaim) -> tuple[int, tuple[str, ...], str]:
        """Return a claim's GPUs, its allocated GPU devices and the GPU class it names ("" for none)."""
        if c.allocated:
            by_name = {r.name: r for r in c.requests}
            ids: list[str] = []
            cls = ""
            for d in c.devices:
                head = d.request.partition("/")[0]
                r = by_name.get(head)
                chosen = r.chosen(d.request) if r is not None else None
                if chosen is not None and chosen.device_class in self.gpu_classes:
                    ids.append(d.id)
                    cls = cls or chosen.device_class
            return len(ids), tuple(ids), cls
        n, cls = 0, ""
        for r in c.requests:
            first = r.first
            k = self._count(first)
            if k:
                n += k
                cls = cls or first.device_class
        return n, (), cls

    def pod_gpus(self, namespace: str, claims: Iterable[PodClaim]) -> int:
        """Return the GPUs a pod asks through its claims (0 for a claim or template not seen yet)."""
        total = 0
        for pc in claims:
            c = self._claim_of(namespace, pc)[0]
            if c is not None:
                total += self.claim_gpus(c)[0]
        return total

    def gpu_claims(self, namespace: str, claims: Iterable[PodClaim]) -> list[GpuClaim]:
        """Return the pod's claims that ask GPUs, as the JSON lists them."""
        out: list[GpuClaim] = []
        for pc in claims:
            c, templated = self._claim_of(namespace, pc)
            if c is None:
                continue
            n, ids, cls = self.claim_gpus(c)
            if n or cls:
                name = (pc.claim or pc.name) if templated else c.name
                out.append(GpuClaim(name, cls, n, c.allocated and not templated, ids))
        return out

    def held_by(self, namespace: str, claims: Iterable[PodClaim]) -> str:
        """Return why the scheduler holds a pod before queueing it, from its claims; "" when nothing does.

        The DynamicResources PreEnqueue check (foreachPodResourceClaim) keeps a pod out of the queue,
        with no condition and no event, while a claim it names is missing or being deleted, or a
        template's claim is not created yet."""
        for pc in claims:
            if pc.claim:
                c = self.claims.get((namespace, pc.claim))
                if c is None:
                    return f"ResourceClaim {pc.claim} does not exist"
                if c.deleting:
                    return f"ResourceClaim {pc.claim} is being deleted"
            elif pc.template:
                if (namespace, pc.template) not in self.templates:
                    return f"ResourceClaimTemplate {pc.template} does not exist"
                return f"the ResourceClaim from template {pc.template} is not created yet"
        return ""

    def unresolved(self, claims_of: Callable[[str], tuple[PodClaim, ...]]) -> dict[str, tuple[str, str]]:
        """Return, by pod uid, (reason, words) for the pods naming a claim, template or class not there.

        `claims_of` gives a pod's claims by its uid. Walks the claims pods name only after a
        change of them (`version`): a tick asks every time, and the answer rarely changes."""
        if self._unresolved is not None and self._unresolved[0] == self.version:
            return self._unresolved[1]
        out: dict[str, tuple[str, str]] = {}
        classes = self.classes
        for key, uids in self.claim_users.items():
            c = self.claims.get(key)
            if c is None:
                # A template's claim the controller has not made yet is named by the template too.
                found: tuple[str, str] | None = (CLAIM_MISSING, f"ResourceClaim {key[1]} does not exist")
            elif c.deleting:
                found = (CLAIM_DELETING, f"ResourceClaim {key[1]} is being deleted")
            else:
                missing = next(
                    (r.first.device_class for r in c.requests if r.first.device_class not in classes), None
                )
                found = None
                if missing is not None and not c.allocated:
                    found = (CLASS_MISSING, f"DeviceClass {missing} (claim {key[1]}) does not exist")
            if found is not None:
                for uid in _each(uids):
                    out.setdefault(uid, found)
        for key, uids in self.template_users.items():
            if key in self.templates:
                continue
            for uid in _each(uids):
                # Once the claim is made the template is not read again: only a claim not made yet waits on it.
                if any(pc.template == key[1] and not pc.claim for pc in claims_of(uid)):
                    out.setdefault(uid, (TEMPLATE_MISSING, f"ResourceClaimTemplate {key[1]} does not exist"))
        self._unresolved = (self.version, out)
        return out

    # ---- capacity ------------------------------------------------------------------------------------

    def per_node(self) -> dict[str, dict[str, int]]:
        """Return GPU-class devices per node and class, from the newest generation of each pool."""
        if self._per_node is None:
            self._pool_part.clear()
            self._node_pools.clear()
            self._dirty_pools = set(self._pool_slices)
            out: dict[str, dict[str, int]] = {}
        elif not self._dirty_pools:
            return self._per_node
        else:
            out = dict(self._per_node)  # a new dict each change: one handed out before stays as it was
        touched: set[str] = set()
        node_pools = self._node_pools
        for pool in self._dirty_pools:
            before = self._pool_part.pop(pool, {})
            for node in before:
                pools = node_pools.get(node)
                if pools is not None:
                    pools.discard(pool)
                    if not pools:
                        del node_pools[node]
            part = self._pool_counts(pool)
            if part:
                self._pool_part[pool] = part
                for node in part:
                    node_pools.setdefault(node, set()).add(pool)
            touched.update(before)
            touched.update(part)
        self._dirty_pools = set()
        for node in touched:
            there = self._node_sum(node)
            if there:
                out[node] = there
            else:
                out.pop(node, None)
        self._per_node = out
        return out

    def _node_sum(self, node: str) -> dict[str, int]:
        """Return one node's devices per class over the pools that publish there (its own, nearly always)."""
        there: dict[str, int] = {}
        for pool in self._node_pools.get(node, ()):
            for cls_name, n in self._pool_part.get(pool, {}).get(node, {}).items():
                there[cls_name] = there.get(cls_name, 0) + n
        return there

    def _pool_counts(self, pool: tuple[str, str]) -> dict[str, dict[str, int]]:
        """Return one pool's devices per node and class, from its newest generation's slices."""
        slices = [self.slices[name] for name in self._pool_slices.get(pool, ())]
        newest = max((s.generation for s in slices), default=0)
        out: dict[str, dict[str, int]] = {}
        for s in slices:
            if not s.node or s.generation < newest:
                continue
            counts = self._slice_counts.get(s.name)
            if counts is None:
                counts = self._slice_counts[s.name] = self._count_slice(s)
            for cls_name, n in counts.items():
                there = out.setdefault(s.node, {})
                there[cls_name] = there.get(cls_name, 0) + n
        return out

    def _count_slice(self, s: ResourceSlice) -> dict[str, int]:
        out: dict[str, int] = {}
        for cls_name in self.gpu_classes:
            cls = self.classes.get(cls_name)
            n = sum(1 for d in s.devices if matches(cls, cls_name, s.driver, d))
            if n:
                out[cls_name] = n
        return out

    def node_gpus(self) -> dict[str, int]:
        """Return the GPUs ResourceSlices publish per node, every GPU class together."""
        if self._node_gpus is None:
            self._node_gpus = {node: sum(by.values()) for node, by in self.per_node().items()}
        return self._node_gpus
