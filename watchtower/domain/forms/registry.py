"""The queue forms, one line each: the one list every layer reads to find a form's slice.

The order is the order a whole picture is best applied in (see domain/kinds.py `WATCHED`); adding a form
is its slice and one line here.
"""

from __future__ import annotations

from watchtower.domain.forms.dra.form import FORM as DRA
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.gangs.form import FORM as GANGS
from watchtower.domain.forms.jobset.form import FORM as JOBSET
from watchtower.domain.forms.kueue.form import FORM as KUEUE
from watchtower.domain.forms.paddle.form import FORM as PADDLE
from watchtower.domain.forms.pods.form import FORM as PODS
from watchtower.domain.forms.quota.form import FORM as QUOTA

FORMS: tuple[QueueForm, ...] = (PODS, QUOTA, PADDLE, GANGS, JOBSET, DRA, KUEUE)


def form_named(name: str) -> QueueForm:
    """Return the form registered under `name`; raise KeyError for a name no form has."""
    for f in FORMS:
        if f.name == name:
            return f
    raise KeyError(name)
