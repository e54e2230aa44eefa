"""Write the Prometheus rules, their promtool tests and the Alertmanager configuration from one configuration.

    python -m alerts.generate [--config FILE] [--out DIR] [--check]

Without --config the defaults are used (the committed files). --check writes nothing and exits 1 when a file
differs from what would be written (the no-drift check of CI).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from watchtower.config import ConfigError, Settings, load_settings

from .alerting import alerting_group
from .alertmanager import SecretInlineError, alertmanager_config
from .params import params_from
from .recording import gpu_group, queue_group
from .render import to_yaml
from .unit_tests import unit_tests

HERE = Path(__file__).parent
RULES = Path("generated/watchtower-rules.yaml")
ALERTMANAGER = Path("generated/alertmanager.yaml")
TESTS = Path("tests/watchtower-rules.test.yaml")
COMMAND = "python -m alerts.generate"


def render_all(settings: Settings, *, source: str = "") -> dict[Path, str]:
    """Return {path relative to the output directory: text} for every generated file."""
    p = params_from(settings)
    rules = {"groups": [queue_group(p), gpu_group(p), alerting_group(p)]}
    rule_file = Path("..") / RULES  # promtool resolves rule_files from the test file's directory
    return {
        RULES: to_yaml(rules, command=COMMAND, source=source),
        ALERTMANAGER: to_yaml(alertmanager_config(settings), command=COMMAND, source=source),
        TESTS: to_yaml(unit_tests(p, str(rule_file)), command=COMMAND, source=source),
    }


def write_all(files: dict[Path, str], out: Path) -> list[Path]:
    """Write the files under `out`; return those whose bytes changed."""
    changed = []
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def drifted(files: dict[Path, str], out: Path) -> list[Path]:
    return [
        out / rel
        for rel, text in files.items()
        if not (out / rel).exists() or (out / rel).read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    ap.add_argument("--config", help="Watchtower configuration file (default: the built-in defaults)")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: alerts/)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = ap.parse_args(argv)
    try:
        settings = load_settings(args.config)
        files = render_all(settings, source=args.config or "")
    except (ConfigError, SecretInlineError, ValueError) as e:
        print(f"alerts.generate: {e}", file=sys.stderr)
        return 2
    if args.check:
        stale = drifted(files, args.out)
        for path in stale:
            print(f"out of date: {path} (run {COMMAND})", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all(files, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
