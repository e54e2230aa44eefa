"""The pods form's registration."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.pods.facts import FACTS

FORM = QueueForm(
    "pods",
    (kinds.NAMESPACE, kinds.PRIORITY_CLASS, kinds.NODE, kinds.POD, kinds.EVENT),
    "pods with PodScheduled=False, in kube-scheduler's queue",
    facts=FACTS,
)
