"""The PaddleJob form's registration."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.paddle import present
from watchtower.domain.forms.paddle.facts import FACTS

FORM = QueueForm(
    "paddle",
    (kinds.PADDLE_JOB,),
    "a PaddleJob before its pods",
    read_from=present.read_from,
    facts=FACTS,
)
