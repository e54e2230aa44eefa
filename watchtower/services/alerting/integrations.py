"""The integrations of each receiver, from the configuration, and a digest of each to notice a change."""

from __future__ import annotations

import hashlib

import orjson
from pydantic import SecretStr

from watchtower.config.alerting import AlertingConfig
from watchtower.domain.alerts.integration import Integration


def integrations(cfg: AlertingConfig) -> dict[str, list[Integration]]:
    """Return receiver name → its integrations, in configuration order."""
    return {r.name: [Integration(i, c.send_resolved) for i, c in r.channels()] for r in cfg.receivers}


def integration_configs(cfg: AlertingConfig) -> dict[str, str]:
    """Return integration id → a digest of its configuration (secrets included), to notice a change."""
    out: dict[str, str] = {}
    for r in cfg.receivers:
        for i, c in r.channels():
            body = orjson.dumps(
                c.model_dump(),
                default=lambda v: v.get_secret_value() if isinstance(v, SecretStr) else str(v),
                option=orjson.OPT_SORT_KEYS,
            )
            out[str(i)] = hashlib.sha256(body).hexdigest()[:16]
    return out
