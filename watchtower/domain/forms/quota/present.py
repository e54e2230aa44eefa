"""The quota form in the queue's pages: where a refused controller's wait was read from. (Its workload key,
`quota`, stays with the common ones in services/queue_json.py: docs/json.md lists it last.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchtower.domain.forms.gangs.records import SOURCE_QUOTA


def read_from(doc: Mapping[str, Any]) -> str | None:
    if doc["source"] != SOURCE_QUOTA:
        return None
    q = doc["quota"]
    return f"ResourceQuota {q['name']}" if q else "its namespace's ResourceQuota"
