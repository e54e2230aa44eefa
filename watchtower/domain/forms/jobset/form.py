"""The JobSet form's registration."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm

FORM = QueueForm("jobset", (kinds.JOBSET,), "the pods of a JobSet or TrainJob, as one workload")
