"""The PaddleJob form's registration."""

from watchtower.domain import kinds
from watchtower.domain.forms.form import QueueForm

FORM = QueueForm("paddle", (kinds.PADDLE_JOB,), "a PaddleJob before its pods")
