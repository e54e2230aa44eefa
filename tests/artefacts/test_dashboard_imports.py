"""The grafanalib `*.dashboard.py` files obey the same layering contract as the rest of dashboards/.

import-linter skips modules whose file names hold extra dots ("too many dots in the name"), so the
contract in pyproject.toml cannot see these files; this test reads their imports instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
ALLOWED = ("watchtower.domain", "watchtower.config", "dashboards", "grafanalib", "__future__")
FILES = sorted(DASHBOARDS.glob("*.dashboard.py"))


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


def test_there_are_dashboard_sources_to_check() -> None:
    assert FILES


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_dashboard_sources_import_only_the_domain_the_config_and_grafanalib(path: Path) -> None:
    stdlib = {
        "typing",
        "collections",
        "dataclasses",
        "functools",
        "itertools",
        "math",
        "os",
        "sys",
        "pathlib",
    }
    bad = [
        m
        for m in _imports(path)
        if not (m.split(".")[0] in stdlib or any(m == a or m.startswith(a + ".") for a in ALLOWED))
    ]
    assert bad == [], f"{path.name} imports {bad}"
