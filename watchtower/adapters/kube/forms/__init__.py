"""The queue forms' decoding, one module per form: each says how it decodes the kinds it watches.

The registry below is the one place the decoder learns a form: `readers` asks each form for its kinds'
readers and checks that every watched kind (domain/kinds.py) has exactly one. Adding a form is its
module here and one line in `FORMS`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from watchtower.domain.kinds import WATCHED

from ..reading import KindReader, Reading
from . import dra, gangs, jobset, kueue, paddle, pods, quota

# Each form's module, with `readers(ctx: Reading) -> dict[str, KindReader]`.
FORMS: tuple[ModuleType, ...] = (pods, quota, paddle, jobset, gangs, dra, kueue)


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return the reader of each watched kind, by kind name; raise ValueError when the forms and the
    watched kinds disagree (a kind read twice, a kind not read, or one that is not watched)."""
    out: dict[str, KindReader] = {}
    for form in FORMS:
        make: Callable[[Reading], dict[str, KindReader]] = form.readers
        for name, r in make(ctx).items():
            if name in out:
                raise ValueError(f"kind {name} read by two forms")
            out[name] = r
    watched = {k.name for k in WATCHED}
    if set(out) != watched:
        raise ValueError(f"forms and watched kinds differ: {sorted(set(out) ^ watched)}")
    return out
