"""The gangs form's registration: upstream Workload/PodGroup gangs and Volcano's PodGroups and Queues."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.gangs import present, shapes
from watchtower.domain.forms.gangs.facts import FACTS
from watchtower.domain.forms.gangs.part import GangForm

FORM = QueueForm(
    "gangs",
    (kinds.WORKLOAD, kinds.POD_GROUP, kinds.VOLCANO_POD_GROUP, kinds.VOLCANO_QUEUE),
    "a gang held whole: an upstream Workload/PodGroup, a Volcano PodGroup in its Queue",
    part=GangForm,
    workload_json=present.workload_json,
    queue_json=present.queue_json,
    workload_shape=shapes.GangsWorkload,
    queue_shape=shapes.GangsSections,
    read_from=present.read_from,
    facts=FACTS,
)
