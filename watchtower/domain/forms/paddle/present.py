"""The PaddleJob form in the queue's pages: where a PaddleJob's wait was read from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchtower.domain.forms.gangs.records import SOURCE_PADDLEJOB


def read_from(doc: Mapping[str, Any]) -> str | None:
    return "PaddleJob status" if doc["source"] == SOURCE_PADDLEJOB else None
