"""Reading the YAML file and the environment into `Settings`, with errors that name the YAML path."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .model import Settings

ENV_PREFIX = "WATCHTOWER_"


class ConfigError(Exception):
    """The configuration cannot be used; `problems` lists each as "path: what is wrong"."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source, self.problems = source, problems
        super().__init__(f"{source}: " + "; ".join(problems))


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """WATCHTOWER_SERVER__API_TOKEN=x → {"server": {"api_token": "x"}}; only known sections are read."""
    out: dict[str, Any] = {}
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX) or "__" not in key:
            continue
        parts = key[len(ENV_PREFIX) :].lower().split("__")
        if parts[0] not in Settings.model_fields or any(not p for p in parts):
            continue
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def _read_secret_files(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Fill `x` from the file named by `x_file` (Kubernetes Secret mounts) when `x` is not set."""
    problems = []
    for section, body in list(data.items()):
        if not isinstance(body, dict):
            continue
        for key, value in list(body.items()):
            if key.endswith("_file") and value and body.get(key[:-5]) in (None, ""):
                target = key[:-5]
                try:
                    body[target] = Path(value).read_text(encoding="utf-8").strip()
                except OSError as e:
                    problems.append(f"{section}.{key}: cannot read {value!r}: {e.strerror}")
    if problems:
        raise ConfigError(source, problems)
    return data


def settings_from_mapping(
    data: Mapping[str, Any] | None, *, env: Mapping[str, str] | None = None, source: str = "<config>"
) -> Settings:
    """Return validated settings from parsed YAML plus environment overrides; raise ConfigError."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, [f"(top level): expected a mapping of sections, got {type(data).__name__}"])
    merged = _merge(dict(data), _env_overrides(os.environ if env is None else env))
    merged = _read_secret_files(merged, source)
    try:
        return Settings.model_validate(merged)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{_path(err['loc'])}: {msg}")
        raise ConfigError(source, problems) from None


def load_settings(path: str | Path | None, *, env: Mapping[str, str] | None = None) -> Settings:
    """Return settings from a YAML file (None: defaults only); raise ConfigError with every problem."""
    if path is None:
        return settings_from_mapping({}, env=env, source="<defaults>")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(str(p), [f"cannot read: {e.strerror}"]) from None
    except UnicodeDecodeError:
        raise ConfigError(str(p), ["not UTF-8 text"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(str(p), [f"{where}not valid YAML: {problem}"]) from None
    return settings_from_mapping(data, env=env, source=str(p))
