"""The cluster's name, chosen once at start: `cluster.name`, else what the source found (said in the log)."""

from __future__ import annotations

import logging

from watchtower.config.model import Settings

log = logging.getLogger("watchtower")


def named_cluster(settings: Settings, name: str, origin: str) -> Settings:
    """Return the settings with `cluster.name` set to `name` (from `origin`) unless configured; the name
    chosen and where it came from are logged once, here."""
    if settings.cluster.name is not None:
        log.info("cluster name %r, from cluster.name", settings.cluster.name)
        return settings
    log.info("cluster name %r, from %s (set cluster.name to choose)", name, origin)
    return settings.model_copy(update={"cluster": settings.cluster.model_copy(update={"name": name})})
