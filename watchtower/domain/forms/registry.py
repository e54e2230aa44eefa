"""The queue forms, one line each: the one list every layer reads to find a form's slice.

Adding a form is its slice and one line in `FORMS`. `WATCHED`, the kinds Watchtower lists and watches,
is composed from the forms' kinds.
"""

from __future__ import annotations

from watchtower.domain.forms.dra.form import FORM as DRA
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.gangs.form import FORM as GANGS
from watchtower.domain.forms.gated.form import FORM as GATED
from watchtower.domain.forms.jobset.form import FORM as JOBSET
from watchtower.domain.forms.kueue.form import FORM as KUEUE
from watchtower.domain.forms.paddle.form import FORM as PADDLE
from watchtower.domain.forms.pods.form import FORM as PODS
from watchtower.domain.forms.quota.form import FORM as QUOTA
from watchtower.domain.kinds import Kind

FORMS: tuple[QueueForm, ...] = (PODS, QUOTA, PADDLE, GANGS, JOBSET, DRA, GATED, KUEUE)

# In the order a whole picture is best applied (a dump, the simulator's first LIST): what pods refer to
# first (classes, controllers, queues; the forms' order among them), then pods, then the events naming them.
WATCHED: tuple[Kind, ...] = tuple(sorted((k for f in FORMS for k in f.kinds), key=lambda k: k.stage))


def form_named(name: str) -> QueueForm:
    """Return the form registered under `name`; raise KeyError for a name no form has."""
    for f in FORMS:
        if f.name == name:
            return f
    raise KeyError(name)


def kind_named(kind: str, api_version: str) -> str:
    """Return the name a watched kind goes by for an object's kind and apiVersion (a dump mixes them):
    Volcano's PodGroup → VolcanoPodGroup, Kueue's Workload → KueueWorkload; any other kind is its own name."""
    group = api_version.rpartition("/")[0]
    for k in WATCHED:
        if k.api_kind == kind and k.group == group:
            return k.name
    return kind
