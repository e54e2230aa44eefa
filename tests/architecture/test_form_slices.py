"""Every queue form in the registry (watchtower/domain/forms/registry.py `FORMS`) has its slice in each layer,
and no layer holds a form's module the registry does not name: a form is added or removed whole.

The adapters are read from the tree (file names, ast), so a missing decoder fails here rather than at
start-up; the domain, which is pure, is imported.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from watchtower.domain.forms.registry import FORMS

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = ROOT / "watchtower" / "domain" / "forms"
DECODERS = ROOT / "watchtower" / "adapters" / "kube" / "forms"
NAMES = sorted(f.name for f in FORMS)


def _top_level_functions(path: Path) -> set[str]:
    return {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}


def test_every_registered_form_has_its_decoder_module_and_every_decoder_module_is_a_registered_form() -> None:
    modules = sorted(p.stem for p in DECODERS.glob("*.py") if p.name != "__init__.py")
    assert [n for n in NAMES if n not in modules] == [], (
        "registered forms without adapters/kube/forms/<name>.py"
    )
    assert [m for m in modules if m not in NAMES] == [], "adapters/kube/forms/ modules of no registered form"
    # adapters/kube/forms/__init__.py calls each one's `readers(ctx)`.
    assert [n for n in NAMES if "readers" not in _top_level_functions(DECODERS / f"{n}.py")] == []


def test_every_registered_form_has_its_domain_package_and_every_package_there_is_a_registered_form() -> None:
    packages = sorted(p.name for p in DOMAIN.iterdir() if (p / "__init__.py").is_file())
    assert packages == NAMES
    # Each package registers the form named as the package (its `FORM` is the registry's).
    for form in FORMS:
        assert importlib.import_module(f"watchtower.domain.forms.{form.name}.form").FORM is form


def test_no_two_forms_share_a_name() -> None:
    assert len(NAMES) == len(set(NAMES))
