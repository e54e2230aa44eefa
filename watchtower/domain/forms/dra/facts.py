"""The DRA form's step of a workload's facts (stage 20): its pods' claims that ask GPUs, and why a pod
that names a claim not ready waits before the scheduler tries it.

Before the gangs' stage: a pod group's words, when it has some, replace these.
"""

from __future__ import annotations

from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsPass, FactsStep


class _DraPass(FactsPass):
    __slots__ = ()

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        rep = draft.oldest_queued
        if rep is not None and rep.claims and draft.diagnosis is None:
            held = ctx.state.dra.held_by(rep.namespace, rep.claims)
            if held:
                draft.why = f"held before the queue (DRA): {held}"
        for p in draft.tracked:
            if p.claims:
                for gc in ctx.state.dra.gpu_claims(p.namespace, p.claims):
                    draft.gpu_claims.setdefault(gc.name, gc)


_PASS = _DraPass()


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
    return _PASS if any(p.claims for p in draft.tracked) else None


FACTS = FactsStep(stage=20, begin=_begin)
