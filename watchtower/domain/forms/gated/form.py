"""The gated form's registration: no kind of its own (its pods are the pods form's)."""

from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.gated import shapes
from watchtower.domain.forms.gated.facts import FACTS
from watchtower.domain.forms.gated.present import workload_json

FORM = QueueForm(
    "gated",
    (),
    "pods held by scheduling gates: Kueue plain-pod groups, Volcano's queue gate, any other controller's hold",
    workload_json=workload_json,
    workload_shape=shapes.GatedWorkloadKeys,
    facts=FACTS,
)
