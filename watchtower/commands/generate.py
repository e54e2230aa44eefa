"""Every file users import, generated from one configuration: which generator writes which files, where, and
which of them drifted from what the configuration gives (`watchtower generate`).

The generators live beside the package (alerts/, dashboards/) and import only the domain and the config
model; this module only places their output under one root, in the checkout's layout, so that generating
into the checkout reproduces the committed files. A new kind of artefact is one more entry in `SETS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from alerts import generate as alerts_generate
from alerts.grafana import DATASOURCE_UID
from dashboards import generate as dashboards_generate
from manifests import generate as manifests_generate
from watchtower.config import Settings


@dataclass(frozen=True, slots=True)
class Options:
    """What the generators take beside the configuration."""

    source: str = ""  # the configuration file named in the generated headers; "" for the defaults
    grafana_datasource_uid: str = DATASOURCE_UID


@dataclass(frozen=True, slots=True)
class ArtefactSet:
    name: str
    directory: Path  # under the output root
    render: Callable[[Settings, Options], dict[Path, str]]


SETS = (
    ArtefactSet(
        "alerts",
        Path("alerts"),
        lambda s, o: alerts_generate.render_all(
            s, source=o.source, grafana_datasource_uid=o.grafana_datasource_uid
        ),
    ),
    ArtefactSet("dashboards", Path("dashboards"), lambda s, _: dashboards_generate.render_all(s)),
    ArtefactSet(
        "manifests",
        Path("deploy"),
        lambda s, o: manifests_generate.render_all(
            s, source=o.source, grafana_datasource_uid=o.grafana_datasource_uid
        ),
    ),
)


def fleet_mode(settings: Settings) -> Settings:
    """Return `settings` with fleet mode on (`artefacts.fleet`, what `--fleet` sets)."""
    return settings.model_copy(update={"artefacts": settings.artefacts.model_copy(update={"fleet": True})})


def render(settings: Settings, options: Options = Options()) -> dict[Path, str]:
    """Return {path under the output root: text} of every artefact; raise ValueError for a configuration
    the artefacts cannot follow (a window shorter than 4 scrapes, a secret given inline)."""
    out: dict[Path, str] = {}
    for s in SETS:
        for rel, text in s.render(settings, options).items():
            out[s.directory / rel] = text
    return out


def drifted(files: dict[Path, str], root: Path) -> list[Path]:
    """Return the files under `root` that are missing or differ from `files`."""
    return [
        root / rel
        for rel, text in files.items()
        if not (root / rel).is_file() or (root / rel).read_text(encoding="utf-8") != text
    ]


def write(files: dict[Path, str], root: Path) -> list[Path]:
    """Write the files under `root`; return those whose bytes changed."""
    changed = drifted(files, root)
    for path in changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path.relative_to(root)], encoding="utf-8")
    return changed
