"""Reading the YAML file and the environment into `Settings`, with errors that name the YAML path."""

from __future__ import annotations

import logging
import os
import re
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from .alerting import AlertingConfig
from .consistency import (
    CONSISTENCY,
    alerting_problems,
    fairness_problems,
    fleet_send_problems,
    owners_problems,
    prometheus_problems,
    tier_problems,
)
from .model import Settings
from .prometheus import PrometheusConfig

log = logging.getLogger(__name__)

ENV_PREFIX = "WATCHTOWER_"


class ConfigError(Exception):
    """The configuration cannot be used; `problems` lists each as "path: what is wrong"."""

    def __init__(self, source: str, problems: list[str], warnings: list[str] | None = None) -> None:
        self.source, self.problems, self.warnings = source, problems, warnings or []
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


def _read_secret_files(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Return `data` with `x` filled from the file `x_file` names (Kubernetes Secret mounts) where `x` is
    not set, and a problem for each file that cannot be read."""
    problems, out = [], dict(data)
    for section, body in data.items():
        if not isinstance(body, dict):
            continue
        for key, value in body.items():
            if key.endswith("_file") and value and body.get(key[:-5]) in (None, ""):
                try:
                    text = Path(value).read_text(encoding="utf-8").strip()
                except OSError as e:
                    problems.append(f"{section}.{key}: cannot read {value!r}: {e.strerror}")
                else:
                    out[section] = {**out[section], key[:-5]: text}
    return out, problems


def _read_what_if_files(
    data: dict[str, Any], base_dir: Path | None
) -> tuple[dict[str, Any], dict[int, str], list[str]]:
    """Return `data` with each `replay.what_if[].policy` given as a file replaced by the mapping the file
    holds, which entries came from which file, and a problem for each file that cannot be read."""
    replay = data.get("replay")
    entries = replay.get("what_if") if isinstance(replay, Mapping) else None
    if not isinstance(replay, Mapping) or not isinstance(entries, list):
        return data, {}, []
    files: dict[int, str] = {}
    problems: list[str] = []
    out: list[Any] = []
    for i, entry in enumerate(entries):
        name = entry.get("policy") if isinstance(entry, Mapping) else None
        if isinstance(name, str):
            where = f"replay.what_if[{i}].policy"
            path = Path(name)
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path  # beside the configuration file, as a ConfigMap mounts them together
            try:
                loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
            except OSError as e:
                problems.append(f"{where}: cannot read {name!r}: {e.strerror}")
            except UnicodeDecodeError:
                problems.append(f"{where}: {name}: not UTF-8 text")
            except yaml.YAMLError as e:
                problems.append(f"{where}: {name}: not valid YAML: {getattr(e, 'problem', None) or e}")
            else:
                if loaded is None:
                    loaded = {}
                if isinstance(loaded, dict):
                    files[i] = name
                    entry = {**entry, "policy": loaded}
                else:
                    problems.append(f"{where}: {name}: a mapping is expected, not {type(loaded).__name__}")
        out.append(entry)
    return {**data, "replay": {**replay, "what_if": out}}, files, problems


def _what_if_problems(settings: Settings, files: Mapping[int, str]) -> list[str]:
    """Return each what-if policy's problems as `watchtower replay` words them, at its path here."""
    # Imported here: the replay's policy model reads this package's model, so a module-level import of it
    # from the package's own loading would be circular at import time.
    from watchtower.replay.what_if import policy_problems

    found = []
    for i, w in enumerate(settings.replay.what_if):
        if isinstance(w.policy, str):
            continue  # a file that could not be read: its problem is already listed
        base = f"replay.what_if[{i}].policy"
        for p in policy_problems(w.name, w.policy, settings.tiers):
            path, _, msg = p.partition(": ")
            if i in files:
                found.append(f"{base} ({files[i]}): {p}")
            elif path == "(top level)":
                found.append(f"{base}: {msg}")
            else:
                found.append(f"{base}.{p}")
    return found


def _cross_field_problems(data: Mapping[str, Any]) -> list[str]:
    """Return the cross-field problems of raw data, which pydantic skips once a field of the model fails."""
    found = []
    if "tiers" in data:
        found += tier_problems(data["tiers"])
    if isinstance(alerting := data.get("alerting"), Mapping):
        defaults = AlertingConfig().model_dump(include={"route", "receivers"})
        found += alerting_problems({**defaults, **alerting}, base="alerting")
    if isinstance(prom := data.get("prometheus"), Mapping):
        fields = PrometheusConfig.model_fields
        defaults = {k: fields[k].default for k in ("idle_window", "scrape_interval", "query_step")}
        found += prometheus_problems({**defaults, **prom}, base="prometheus")
    if isinstance(fairness := data.get("fairness"), Mapping):
        alerting_data = data.get("alerting")
        receivers = alerting_data.get("receivers") if isinstance(alerting_data, Mapping) else None
        if receivers is None:
            receivers = AlertingConfig().model_dump(include={"receivers"})["receivers"]
        found += fairness_problems(fairness, receivers, base="fairness")
    found += fleet_send_problems(data.get("fleet"), data.get("fairness"))
    if isinstance(owners := data.get("owners"), Mapping):
        alerting_data = data.get("alerting")
        receivers = alerting_data.get("receivers") if isinstance(alerting_data, Mapping) else None
        if receivers is None:
            receivers = AlertingConfig().model_dump(include={"receivers"})["receivers"]
        found += owners_problems(owners, receivers)
    return [f"{path}: {msg}" for path, msg in found]


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or any(_is_secret(a) for a in typing.get_args(annotation))


def secrets_written_in(model: type[BaseModel], data: Any, path: str = "") -> Iterator[str]:
    """Yield a warning for each secret (a SecretStr field) given in the file itself; never the value."""
    if not isinstance(data, Mapping):
        return
    for name, field in model.model_fields.items():
        key = field.alias or name
        here = f"{path}.{key}" if path else key
        value = data.get(key)
        if value in (None, "", [], {}):
            continue
        if _is_secret(field.annotation):
            ways = [f"{here}_file (a file, such as a mounted Kubernetes Secret)"]
            if here.count(".") == 1 and "[" not in here:  # env overrides reach section keys, not list items
                ways.append(f"the environment variable {ENV_PREFIX}{here.upper().replace('.', '__')}")
            yield f"{here} is a secret written in the configuration file; give it as {' or '.join(ways)}"
        for sub in _models_in(field.annotation):
            items = enumerate(value) if isinstance(value, list) else [(None, value)]
            for i, item in items:
                yield from secrets_written_in(sub, item, here if i is None else f"{here}[{i}]")


def _password_in_store_url(data: Mapping[str, Any]) -> Iterator[str]:
    store = data.get("store")
    url = store.get("url") if isinstance(store, Mapping) else None
    if isinstance(url, str) and re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/@?#]*:[^/@?#]*@", url):
        yield (
            "store.url carries a password written in the configuration file; give the password as"
            f" store.password_file or the environment variable {ENV_PREFIX}STORE__PASSWORD, or the whole URL"
            " as store.url_file"
        )


def settings_and_warnings(
    data: Mapping[str, Any] | None,
    *,
    env: Mapping[str, str] | None = None,
    source: str = "<config>",
    base_dir: Path | None = None,
) -> tuple[Settings, list[str]]:
    """Return validated settings from parsed YAML plus environment overrides, and warnings about the file
    (secrets written in it); raise ConfigError listing every problem, field and cross-field, at once.
    `base_dir`: where the files the configuration names by a relative path are (its own directory)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, [f"(top level): expected a mapping of sections, got {type(data).__name__}"])
    warnings = list(secrets_written_in(Settings, data)) + list(_password_in_store_url(data))
    merged = _merge(dict(data), _env_overrides(os.environ if env is None else env))
    merged, problems = _read_secret_files(merged)
    merged, what_if_files, unread = _read_what_if_files(merged, base_dir)
    problems += unread
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as e:
        deferred: list[str] = []
        for err in e.errors():
            msg = err["msg"].removeprefix("Value error, ")
            (deferred if err["type"] == CONSISTENCY else problems).append(f"{_path(err['loc'])}: {msg}")
        # The second pass finds what pydantic found and what it never reached; its own wording, once.
        cross = _cross_field_problems(merged)
        problems += cross or deferred
        # In the order of the file's sections, so a reader can walk it top to bottom.
        order = {section: i for i, section in enumerate(merged)}
        problems.sort(key=lambda p: order.get(re.split(r"[.\[:]", p, maxsplit=1)[0], len(order)))
        raise ConfigError(source, problems, warnings) from None
    problems += _what_if_problems(settings, what_if_files)
    if problems:
        raise ConfigError(source, problems, warnings)
    return settings, warnings


def settings_from_mapping(
    data: Mapping[str, Any] | None, *, env: Mapping[str, str] | None = None, source: str = "<config>"
) -> Settings:
    """Return validated settings from parsed YAML plus environment overrides; raise ConfigError."""
    settings, warnings = settings_and_warnings(data, env=env, source=source)
    for w in warnings:
        log.warning("%s: %s", source, w)
    return settings


def load_settings(path: str | Path | None, *, env: Mapping[str, str] | None = None) -> Settings:
    """Return settings from a YAML file (None: defaults only), logging its warnings; raise ConfigError."""
    settings, warnings = read_settings(path, env=env)
    for w in warnings:
        log.warning("%s: %s", path, w)
    return settings


def read_settings(
    path: str | Path | None, *, env: Mapping[str, str] | None = None
) -> tuple[Settings, list[str]]:
    """Return settings from a YAML file (None: defaults only) and its warnings; raise ConfigError."""
    if path is None:
        return settings_and_warnings({}, env=env, source="<defaults>")
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(str(p), [f"cannot read: {e.strerror}"]) from None
    return parse_settings(raw, env=env, source=str(p), base_dir=p.parent)


def parse_settings(
    raw: bytes,
    *,
    env: Mapping[str, str] | None = None,
    source: str = "<config>",
    base_dir: Path | None = None,
) -> tuple[Settings, list[str]]:
    """Return settings from the bytes of a YAML file (in `base_dir`) and its warnings; raise ConfigError."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(source, ["not UTF-8 text"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(source, [f"{where}not valid YAML: {problem}"]) from None
    return settings_and_warnings(data, env=env, source=source, base_dir=base_dir)
