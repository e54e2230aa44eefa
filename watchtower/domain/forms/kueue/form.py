"""The Kueue form's registration."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.kueue.facts import FACTS

FORM = QueueForm(
    "kueue",
    (kinds.WORKLOAD_PRIORITY_CLASS, kinds.CLUSTER_QUEUE, kinds.LOCAL_QUEUE, kinds.KUEUE_WORKLOAD),
    "a job Kueue holds suspended (no pods) until its Workload is admitted",
    facts=FACTS,
)
