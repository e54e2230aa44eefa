"""What paddle-operator says about a PaddleJob that waits before its pods: its newest Warning event.

paddle-operator records events on the PaddleJob itself as "paddlejob-controller" (main.go
GetEventRecorderFor): Warning "Create" "create failed <kind> <name>" and Warning "Delete" "delete failed
<kind> <name>" when the API server refuses it a pod, service, configmap or Volcano PodGroup, and
Normal "Created"/"Deleted" otherwise (controllers/paddlejob_controller.go createResource,
deleteResource). <kind> is read from the object before it is created and is often empty there. A
refused pod's quota words are not in that message: a namespace's quota numbers are read for those
(forms.gangs.wait.job_wait), and a controller's `FailedCreate ... exceeded quota` is a quota refusal (forms/quota/refusals.py).
"""

from __future__ import annotations

import msgspec

from watchtower.domain.records import Controller, Event, api_group

from .workloads import WorkloadKey

PADDLE_OPERATOR = "paddlejob-controller"
PADDLE_GROUP = "batch.paddlepaddle.org"
# The API server drops events after --event-ttl, 1 h by default (DESIGN §3.11): past that the operator's
# word is no longer what it says now.
EVENT_TTL = 3600.0
# Events stop at 1024 bytes (DESIGN §3.5): a longer message is not the operator's.
_MESSAGE_LIMIT = 1024


class OperatorWarning(msgspec.Struct, frozen=True, gc=False):
    """A PaddleJob's newest Warning event from paddle-operator."""

    job_uid: str  # the event's regarding uid: an older job of the same name is not this one
    reason: str
    message: str
    at: float  # when it was last seen

    @property
    def words(self) -> str:
        return f"paddle-operator: {self.reason}: {self.message}"

    def current(self, now: float) -> bool:
        """Return True while the API server would still hold the event (within the TTL of `now`)."""
        return now - EVENT_TTL <= self.at <= now + 60

    def speaks_for(self, job: Controller, now: float) -> bool:
        """Return True when it is current and about this job (the same uid, when both are known)."""
        return self.current(now) and not (self.job_uid and job.uid and self.job_uid != job.uid)


def operator_warning(ev: Event) -> tuple[WorkloadKey, OperatorWarning] | None:
    """Return the PaddleJob a paddle-operator Warning event is about and what it says; None for any other."""
    reg = ev.regarding
    if ev.type != "Warning" or ev.source != PADDLE_OPERATOR or reg.kind != "PaddleJob":
        return None
    if api_group(reg.api_version) != PADDLE_GROUP or not reg.name:
        return None
    at = ev.seen
    if at is None:  # of no known age: it cannot be placed within the TTL
        return None
    message = " ".join((ev.message or "").split())[:_MESSAGE_LIMIT]
    key = WorkloadKey(reg.namespace or ev.namespace, "PaddleJob", reg.name)
    return key, OperatorWarning(reg.uid, ev.reason, message, at)
