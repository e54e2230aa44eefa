"""Watchtower's configuration: one YAML file validated by pydantic, secrets from env or files.

No instance is made at import time: `load_settings(path)` builds one for the composition root.
"""

from watchtower.domain.timefmt import format_duration

from .durations import Duration, parse_duration
from .loading import ConfigError, load_settings, read_settings, settings_from_mapping
from .model import Settings

__all__ = [
    "ConfigError",
    "Duration",
    "Settings",
    "format_duration",
    "load_settings",
    "parse_duration",
    "read_settings",
    "settings_from_mapping",
]
