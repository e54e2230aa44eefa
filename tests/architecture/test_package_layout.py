"""The package's shape, checked: no import cycle, no long module without its reason, every module in a contract.

These read the source (ast, pyproject.toml); import-linter checks the layering itself in `make lint`.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("watchtower", "dashboards", "alerts", "manifests")
LONG = 400  # lines; a longer module says why in its docstring, on a line starting "Size:"


def _modules(package: str = "watchtower") -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any("." in p for p in parts):  # dashboards/*.dashboard.py are not importable names
            continue
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every watchtower module `name` imports: top level, inside functions and under TYPE_CHECKING alike."""

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(t for a in node.names if (t := owner(a.name)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                target = full if full in modules else owner(source)
                if target:
                    targets.add(target)
    targets.discard(name)
    return targets


def import_cycles(modules: dict[str, Path]) -> list[list[str]]:
    """The strongly connected groups of more than one module in the import graph (Tarjan)."""
    edges = {name: _imports(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    return groups


def test_no_module_of_watchtower_is_in_an_import_cycle() -> None:
    assert import_cycles(_modules()) == []


def test_the_cycle_finder_sees_a_cycle_through_a_function_local_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pkg import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from pkg.a import x\n")
    modules = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    assert import_cycles(modules) == [["pkg.a", "pkg.b"]]


def test_a_module_longer_than_400_lines_says_why_in_its_docstring() -> None:
    unexplained = []
    for name, path in _modules().items():
        source = path.read_text()
        if source.count("\n") <= LONG:
            continue
        doc = ast.get_docstring(ast.parse(source)) or ""
        if not any(line.startswith("Size:") for line in doc.splitlines()):
            unexplained.append(f"{name} ({source.count(chr(10))} lines)")
    assert unexplained == []


def _contract_modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    named: list[str] = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        for key in ("source_modules", "layers", "modules"):
            named.extend(contract.get(key, []))
    return named


def test_every_module_falls_under_an_import_contract() -> None:
    named = _contract_modules()
    uncovered = [
        name
        for package in PACKAGES
        for name in _modules(package)
        if name not in PACKAGES and not any(name == n or name.startswith(n + ".") for n in named)
    ]
    assert uncovered == []
