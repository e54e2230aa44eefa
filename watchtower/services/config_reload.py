"""Config hot reload: the configuration file is polled (its resolved path and a digest of its content), a
changed one is validated, and a valid one applied as far as a running service can take it.

Kubernetes updates a mounted ConfigMap by pointing the `..data` symlink at a new timestamped directory:
the path the service was given never changes, what it resolves to does. Polling the resolved path and
the content every few seconds sees that without inotify, and equally sees a file edited in place.

A bad file keeps the running configuration: its problems (each "yaml.path: what is wrong") go to the
alert `WatchtowerConfigInvalid` and `watchtower_config_valid` drops to 0 until a valid file arrives.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from watchtower.config.changes import ConfigChanges, config_changes
from watchtower.config.loading import ConfigError, parse_settings
from watchtower.config.model import Settings

log = logging.getLogger(__name__)

# An unreadable file (mid-swap, or a ConfigMap being replaced) counts as a problem only when it stays so.
UNREADABLE_POLLS = 2


class ReloadMetrics(Protocol):
    def config_reloaded(self, result: str, *, valid: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class Reload:
    """What one look at a changed file came to."""

    result: Literal["applied", "invalid"]
    problems: tuple[str, ...] = ()
    changes: ConfigChanges | None = None


class ConfigReloader:
    def __init__(
        self,
        *,
        path: str | Path,
        running: Settings,
        apply: Callable[[Settings, ConfigChanges], object],
        on_problems: Callable[[Sequence[str]], object],
        metrics: ReloadMetrics | None = None,
        prepare: Callable[[Settings], Settings] = lambda s: s,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`apply` takes a valid new configuration and what changed (called only when something it can
        take changed); `on_problems` the problems of a bad one, and () once a good one is back; `prepare`
        completes a parsed configuration as the start did (the URL actually served)."""
        self.path = Path(path)
        self.running = running
        self._apply, self._on_problems, self._prepare = apply, on_problems, prepare
        self.metrics, self.env = metrics, env
        self.problems: tuple[str, ...] = ()
        seen = self._read()
        self._seen = seen[:2] if isinstance(seen, tuple) else None
        self._unreadable = 0

    def _read(self) -> tuple[str, str, bytes] | OSError:
        try:
            real = os.path.realpath(self.path)
            with open(real, "rb") as f:
                data = f.read()
        except OSError as e:
            return e
        return real, hashlib.sha256(data).hexdigest(), data

    def poll(self) -> Reload | None:
        """Look at the file once; return what a change came to, or None when nothing changed."""
        got = self._read()
        if isinstance(got, OSError):
            self._unreadable += 1
            if self._unreadable != UNREADABLE_POLLS:
                return None
            self._seen = None
            return self._invalid([f"(file): cannot read {self.path}: {got.strerror}"])
        self._unreadable = 0
        real, digest, data = got
        if (real, digest) == self._seen:
            return None
        self._seen = (real, digest)
        try:
            new, warnings = parse_settings(
                data, env=self.env, source=str(self.path), base_dir=Path(self.path).parent
            )
        except ConfigError as e:
            return self._invalid(e.problems)
        for w in warnings:
            log.warning("%s: %s", self.path, w)
        new = self._prepare(new)
        changes = config_changes(self.running, new)
        if changes.live:
            self._apply(new, changes)
            log.info("configuration %s reloaded: applied %s", self.path, ", ".join(changes.live))
        if changes.restart:
            log.warning(
                "configuration %s changed where a running service cannot follow; these take effect at the"
                " next restart: %s",
                self.path,
                ", ".join(changes.restart),
            )
        if not changes:
            log.info("configuration %s rewritten with the same content as it runs", self.path)
        self.running = new
        if self.problems:
            self.problems = ()
            self._on_problems(())
        if self.metrics is not None:
            self.metrics.config_reloaded("applied", valid=True)
        return Reload("applied", changes=changes)

    def _invalid(self, problems: Sequence[str]) -> Reload:
        self.problems = tuple(problems)
        log.error(
            "configuration %s changed and cannot be used; the running configuration stays: %s",
            self.path,
            "; ".join(self.problems),
        )
        self._on_problems(self.problems)
        if self.metrics is not None:
            self.metrics.config_reloaded("invalid", valid=False)
        return Reload("invalid", problems=self.problems)

    async def run(self, every: float) -> None:
        """Poll every `every` seconds until cancelled; the file is read off the loop."""
        while True:
            await asyncio.sleep(every)
            try:
                await asyncio.to_thread(self.poll)
            except Exception:  # a bug applying a configuration must not end the polling
                log.exception("configuration reload failed")
