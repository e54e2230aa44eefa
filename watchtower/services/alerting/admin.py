"""Administration through the API: silences, receivers disabled after a 410 Gone, and the alert listing."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from watchtower.config.alerting import AlertingConfig
from watchtower.domain.alerts.integration import Integration
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.model import AlertState, TrackedAlert
from watchtower.domain.alerts.muting import NOT_MUTED, Muted
from watchtower.domain.alerts.outbox import DisabledIntegration
from watchtower.domain.alerts.silences import Silence, expire, new_silence
from watchtower.ports import AlertStore

from .evaluation import AlertEvaluator
from .integrations import integration_configs
from .notify import GroupNotifier

log = logging.getLogger(__name__)

SEVERITY_ORDER = {"critical": 0, "warning": 1}


class AlertAdmin:
    def __init__(
        self,
        *,
        cfg: AlertingConfig,
        store: AlertStore,
        evaluator: AlertEvaluator,
        notifier: GroupNotifier,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.store = store
        self.evaluator = evaluator
        self.notifier = notifier
        self.integrations = notifier.integrations
        self.integration_configs = integration_configs(cfg)
        self.new_id = new_id

    # ---- silences -------------------------------------------------------------------------------------

    def add_silence(
        self,
        *,
        matchers: list[Matcher],
        starts_at: float,
        ends_at: float,
        created_by: str,
        comment: str,
        now: float,
    ) -> Silence:
        s = new_silence(
            id=self.new_id(),
            matchers=matchers,
            starts_at=starts_at,
            ends_at=ends_at,
            created_by=created_by,
            comment=comment,
            now=now,
        )
        self.store.put_silence(s)
        return s

    def expire_silence(self, silence_id: str, now: float) -> Silence | None:
        for s in self.store.silences():
            if s.id == silence_id:
                done = expire(s, now)
                self.store.put_silence(done)
                self.notifier.wake()
                return done
        return None

    def silences(self) -> list[Silence]:
        return self.store.silences()

    # ---- receivers ------------------------------------------------------------------------------------

    def enable_changed_receivers(self, now: float) -> list[str]:
        """Enable again the integrations disabled under a configuration that has changed since (or that
        no longer exist); return their ids. A fixed URL should not wait for someone to call the API."""
        out = []
        for d in self.store.disabled_details():
            if self.integration_configs.get(d.integration) != d.config:
                self.store.enable(d.integration, now)
                log.info("%s: configuration changed since it was disabled; enabled again", d.integration)
                out.append(d.integration)
        return out

    def receivers(self) -> list[tuple[str, list[tuple[Integration, DisabledIntegration | None]]]]:
        """Return each receiver with its integrations and, for a disabled one, why and since when."""
        off = {d.integration: d for d in self.store.disabled_details()}
        return [(name, [(i, off.get(i.key)) for i in lst]) for name, lst in self.integrations.items()]

    def enable_receiver(self, name: str, now: float) -> list[str] | None:
        """Deliver again to a receiver's disabled integrations; return the ids enabled, None if there is
        no such receiver."""
        if name not in self.integrations:
            return None
        off = self.store.disabled()
        done = [i.key for i in self.integrations[name] if i.key in off and self.store.enable(i.key, now)]
        if done:
            log.info("receiver %s enabled again: %s", name, ", ".join(done))
            if self.notifier.on_enqueued is not None:
                self.notifier.on_enqueued()  # its held-back messages are pending again
        return done

    # ---- listing --------------------------------------------------------------------------------------

    def listed_alerts(self, now: float) -> list[tuple[TrackedAlert, Muted]]:
        """Return every known alert (pending, firing, recently resolved) with why it is muted, if it is."""
        mutes = self.notifier.muted(now)
        return [
            (a, mutes.get(a.fingerprint, NOT_MUTED))
            for a in sorted(
                self.evaluator.alerts.values(),
                key=lambda a: (
                    a.state is AlertState.RESOLVED,
                    SEVERITY_ORDER.get(a.severity, 2),
                    a.active_at,
                    a.fingerprint,
                ),
            )
        ]
