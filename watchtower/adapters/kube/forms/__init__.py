"""The queue forms' decoding, one module per form, named as the form (domain/forms/registry.py).

`readers` finds each registered form's module here by the form's name, asks it for its kinds'
readers, and checks that it reads exactly the kinds the form registers: adding a form is its module
here and its line in the registry, nothing in this file.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from watchtower.domain.forms.registry import FORMS, WATCHED

from ..reading import KindReader, Reading


def form_module(name: str) -> ModuleType:
    """Return the decoding module of the form `name`; raise ValueError when it has none."""
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        raise ValueError(f"form {name} has no decoder module adapters/kube/forms/{name}.py") from e


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return the reader of each watched kind, by kind name; raise ValueError when a form's module and
    its registered kinds disagree, or the forms and the watched kinds do."""
    out: dict[str, KindReader] = {}
    for form in FORMS:
        make: Callable[[Reading], dict[str, KindReader]] = form_module(form.name).readers
        made = make(ctx)
        if set(made) != {k.name for k in form.kinds}:
            raise ValueError(
                f"form {form.name} reads {sorted(made)}, registers {[k.name for k in form.kinds]}"
            )
        for name, r in made.items():
            if name in out:
                raise ValueError(f"kind {name} read by two forms")
            out[name] = r
    watched = {k.name for k in WATCHED}
    if set(out) != watched:
        raise ValueError(f"forms and watched kinds differ: {sorted(set(out) ^ watched)}")
    return out
