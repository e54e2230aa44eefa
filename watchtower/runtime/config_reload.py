"""The configuration file's poller, wired to the running parts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path

from watchtower.adapters.metrics.registry import WatchtowerMetrics
from watchtower.api.container import Container
from watchtower.config.alerting import AlertingConfig
from watchtower.config.model import Settings
from watchtower.ports import Sender
from watchtower.runtime.sockets import reachable_at
from watchtower.services.alerting import DeliveryWorker
from watchtower.services.config_reload import ConfigReloader


def config_reloader(
    container: Container,
    path: str | Path,
    *,
    worker: DeliveryWorker | None = None,
    senders: Callable[[AlertingConfig], Mapping[str, Sender]] | None = None,
) -> ConfigReloader:
    """Return the poller of the configuration file at `path`, wired to the running parts: a valid change
    goes to alerting and the delivery worker (new senders) on the event loop; a bad one raises
    WatchtowerConfigInvalid and sets `watchtower_config_valid` to 0. Call on the running event loop."""
    loop = asyncio.get_running_loop()
    alerting = container.alerting
    url = container.settings.server.external_url
    # The name found at start stands in for an unset `cluster.name`, as the URL had does for `external_url`:
    # the file leaving it unset is no change.
    name = container.settings.cluster.name

    def prepare(s: Settings) -> Settings:
        s = reachable_at(s, url)
        if s.cluster.name is None and name is not None:
            s = s.model_copy(update={"cluster": s.cluster.model_copy(update={"name": name})})
        return s

    async def take(new: Settings) -> None:
        if alerting is not None:
            await alerting.reconfigure(new, worker=worker)
        if worker is not None and senders is not None:
            worker.senders = senders(new.alerting)

    def apply(new: Settings, _changes: object) -> None:
        # Polled off the loop; the running parts are changed on it, between evaluations.
        asyncio.run_coroutine_threadsafe(take(new), loop).result(timeout=60)

    metrics = container.metrics
    return ConfigReloader(
        path=path,
        running=container.settings,
        apply=apply,
        on_problems=alerting.config_invalid if alerting is not None else (lambda _p: None),
        metrics=metrics if isinstance(metrics, WatchtowerMetrics) else None,
        prepare=prepare,
    )
