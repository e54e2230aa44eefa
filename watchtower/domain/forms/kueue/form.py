"""The Kueue form's registration."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.kueue import present, shapes
from watchtower.domain.forms.kueue.facts import FACTS
from watchtower.domain.forms.kueue.part import KueueForm

FORM = QueueForm(
    "kueue",
    (kinds.WORKLOAD_PRIORITY_CLASS, kinds.CLUSTER_QUEUE, kinds.LOCAL_QUEUE, kinds.KUEUE_WORKLOAD),
    "a job Kueue holds suspended (no pods) until its Workload is admitted",
    part=KueueForm,
    workload_json=present.workload_json,
    queue_json=present.queue_json,
    workload_shape=shapes.KueueWorkloadKeys,
    queue_shape=shapes.KueueSections,
    read_from=present.read_from,
    facts=FACTS,
)
