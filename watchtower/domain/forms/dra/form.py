"""The DRA form's registration: GPUs asked through ResourceClaims."""

from watchtower.domain import kinds
from watchtower.domain.forms.dra import present, shapes
from watchtower.domain.forms.dra.facts import FACTS
from watchtower.domain.forms.dra.part import DraForm
from watchtower.domain.forms.form import QueueForm

FORM = QueueForm(
    "dra",
    (kinds.DEVICE_CLASS, kinds.RESOURCE_SLICE, kinds.RESOURCE_CLAIM_TEMPLATE, kinds.RESOURCE_CLAIM),
    "pods asking GPUs through DRA ResourceClaims",
    part=DraForm,
    workload_json=present.workload_json,
    queue_json=present.queue_json,
    facts=FACTS,
    workload_shape=shapes.DraWorkload,
    queue_shape=shapes.DraSections,
)
