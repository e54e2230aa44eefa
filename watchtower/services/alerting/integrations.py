"""The integrations of each receiver, from the configuration, and a digest of each to notice a change."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson
from pydantic import BaseModel, SecretStr

from watchtower.config.alerting import AlertingConfig
from watchtower.domain.alerts.integration import Integration, IntegrationId, Kind


def integrations(cfg: AlertingConfig) -> dict[str, list[Integration]]:
    """Return receiver name → its integrations, in configuration order."""
    out: dict[str, list[Integration]] = {}
    for r in cfg.receivers:
        lst = out.setdefault(r.name, [])
        lst.extend(
            Integration(IntegrationId(r.name, "email", i), e.send_resolved) for i, e in enumerate(r.email)
        )
        lst.extend(
            Integration(IntegrationId(r.name, "webhook", i), w.send_resolved)
            for i, w in enumerate(r.webhooks)
        )
    return out


def integration_configs(cfg: AlertingConfig) -> dict[str, str]:
    """Return integration id → a digest of its configuration (secrets included), to notice a change."""
    out: dict[str, str] = {}
    for r in cfg.receivers:
        kinds: list[tuple[Kind, Sequence[BaseModel]]] = [("email", r.email), ("webhook", r.webhooks)]
        for kind, items in kinds:
            for i, c in enumerate(items):
                body = orjson.dumps(
                    c.model_dump(),
                    default=lambda v: v.get_secret_value() if isinstance(v, SecretStr) else str(v),
                    option=orjson.OPT_SORT_KEYS,
                )
                out[str(IntegrationId(r.name, kind, i))] = hashlib.sha256(body).hexdigest()[:16]
    return out
