"""`watchtower analyze`: the queue a dump of the cluster's objects describes, as of a chosen time, as a
table or JSON."""

from __future__ import annotations

from typing import Any

import orjson

from watchtower.bootstrap import object_decoder
from watchtower.config.model import Settings
from watchtower.domain.timefmt import format_duration, rfc3339
from watchtower.services.analyze import FAR_FROM_DUMP, analysis_dict
from watchtower.services.analyze import analyze as run_analysis
from watchtower.services.queue_text import render


def analyze_dump(
    data: bytes, settings: Settings, *, at: float | None, now: float
) -> tuple[dict[str, Any], str | None]:
    """Return the analysis of the dump `data` as a document, and a warning when `at` is more than an hour
    from the newest time in the dump (None otherwise).

    Raises DecodeError for what is not a Kubernetes List."""
    policy = settings.queue_policy()
    result = run_analysis(
        data,
        policy=policy,
        decoder=object_decoder(settings),
        at=at,
        now=now,
        gpu_classes=frozenset(settings.gpu.device_classes),
    )
    taken = result.dump_time
    warning = None
    if at is not None and taken is not None and abs(at - taken) > FAR_FROM_DUMP:
        warning = (
            f"warning: --at {rfc3339(at)} is {format_duration(abs(at - taken))} "
            f"{'after' if at > taken else 'before'} the newest time in the dump ({rfc3339(taken)}): "
            "waits are measured from --at"
        )
    return analysis_dict(result, policy, settings), warning


def as_json(doc: dict[str, Any]) -> bytes:
    """Return the analysis as indented JSON with sorted keys, ending in a newline."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def as_table(doc: dict[str, Any], width: int) -> str:
    """Return the analysis as the terminal's table, `width` columns wide."""
    return render(doc, width=width)
