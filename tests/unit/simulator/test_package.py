"""The simulator package's shape: no import cycle, and the object builders import alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import watchtower.simulator

PACKAGE = Path(watchtower.simulator.__file__).parent


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Return the package's modules `module` imports anywhere: top level, in functions, under TYPE_CHECKING."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*module.split(".")[: -node.level], *([node.module] if node.module else [])])
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        out |= {n for n in names if n in known and n != module}
    return out


def test_no_simulator_module_imports_one_that_imports_it_back():
    modules = {f"watchtower.simulator.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    edges = {m: _imports(p, m, set(modules)) for m, p in modules.items()}

    def reaches(start: str) -> set[str]:
        seen, todo = set(), list(edges[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += edges[m]
        return seen

    assert [m for m in modules if m in reaches(m)] == []


def test_the_object_builders_import_without_the_cluster_or_the_demo():
    code = (
        "import sys, watchtower.simulator.objects, watchtower.simulator.workloads;"
        "print([m for m in sys.modules if m.endswith(('.cluster', '.story', '.warm')) or '.commands' in m])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
