"""The gangs form's registration: upstream Workload/PodGroup gangs and Volcano's PodGroups and Queues."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.gangs.facts import FACTS

FORM = QueueForm(
    "gangs",
    (kinds.WORKLOAD, kinds.POD_GROUP, kinds.VOLCANO_POD_GROUP, kinds.VOLCANO_QUEUE),
    "a gang held whole: an upstream Workload/PodGroup, a Volcano PodGroup in its Queue",
    facts=FACTS,
)
