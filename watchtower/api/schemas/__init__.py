"""Response bodies of the API, one module per resource, field by field as docs/json.md and docs/api.md
describe them, so that /openapi.json documents every field.

The queue and workload bodies are the `watchtower analyze` JSON shapes (services/queue_json.py) so that a
script reads both the same way.
"""

from .alerts import Alert, CreatedSilence, EnabledReceiver, Receiver, Silence
from .analysis import Analysis
from .common import Body, Problem
from .fairness import FairnessReport
from .fairness_history import FairnessHistory
from .gpu import IdleGpuReport
from .health import Health, KindReadiness, LeaderStatus, Readiness
from .preemption import Preemption, Preemptions
from .queue import Queue, WorkloadDetail
from .replay import ReplayAccepted, ReplayDocument, ReplayRefusal, ReplayRequest, ReplayStatus
from .workload import Workload

__all__ = [
    "Alert",
    "Analysis",
    "Body",
    "CreatedSilence",
    "EnabledReceiver",
    "FairnessHistory",
    "FairnessReport",
    "Health",
    "IdleGpuReport",
    "KindReadiness",
    "LeaderStatus",
    "Preemption",
    "Preemptions",
    "Problem",
    "Queue",
    "Readiness",
    "Receiver",
    "ReplayAccepted",
    "ReplayDocument",
    "ReplayRefusal",
    "ReplayRequest",
    "ReplayStatus",
    "Silence",
    "Workload",
    "WorkloadDetail",
]
