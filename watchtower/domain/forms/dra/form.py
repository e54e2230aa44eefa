"""The DRA form's registration: GPUs asked through ResourceClaims."""

from watchtower.domain import kinds
from watchtower.domain.forms.dra.facts import FACTS
from watchtower.domain.forms.form import QueueForm

FORM = QueueForm(
    "dra",
    (kinds.DEVICE_CLASS, kinds.RESOURCE_SLICE, kinds.RESOURCE_CLAIM_TEMPLATE, kinds.RESOURCE_CLAIM),
    "pods asking GPUs through DRA ResourceClaims",
    facts=FACTS,
)
