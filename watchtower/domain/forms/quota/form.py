"""The quota form's registration: controllers whose pods a ResourceQuota refuses."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.quota import present
from watchtower.domain.forms.quota.facts import FACTS

FORM = QueueForm(
    "quota",
    (kinds.RESOURCE_QUOTA, kinds.JOB, kinds.REPLICA_SET),
    "work a ResourceQuota refuses: its controller's FailedCreate, no pod",
    read_from=present.read_from,
    facts=FACTS,
)
