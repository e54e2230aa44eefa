"""The PaddleJob form's registration."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.paddle.facts import FACTS

FORM = QueueForm(
    "paddle",
    (kinds.PADDLE_JOB,),
    "a PaddleJob before its pods",
    facts=FACTS,
)
