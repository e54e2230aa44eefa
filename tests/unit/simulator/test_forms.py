"""The simulator finds each form's controller by the form's registered name: a package under simulator/forms/
named otherwise would never run, and a form's controller serves only kinds its form registers."""

from __future__ import annotations

from pathlib import Path

import watchtower.simulator.forms as forms_package
from watchtower.config.model import SimulatorConfig
from watchtower.domain.forms.registry import FORMS
from watchtower.simulator.cluster import SimulatedCluster
from watchtower.simulator.hooks import FormController, controller_module, form_controllers


def test_every_simulated_form_package_is_named_as_a_registered_form_and_has_a_controller() -> None:
    names = {f.name for f in FORMS}
    packages = {p.name for p in Path(forms_package.__file__).parent.iterdir() if (p / "__init__.py").exists()}
    assert packages <= names, f"not registered forms: {sorted(packages - names)}"
    for name in packages:
        assert controller_module(name) is not None, f"simulator/forms/{name}/ has no controller.py"


def test_a_form_controller_serves_only_its_forms_kinds_and_no_kind_twice() -> None:
    sim = SimulatedCluster(SimulatorConfig(nodes=2, arrivals_per_hour=0, warm_start=False))
    registered = {f.name: {k.name for k in f.kinds} for f in FORMS}
    served: set[str] = set()
    for form in FORMS:
        module = controller_module(form.name)
        if module is None:
            continue
        (made,) = [f for f in sim.forms if type(f).__module__ == module.__name__]
        assert isinstance(made, FormController)
        assert made.kinds <= registered[form.name], form.name
        assert not made.kinds & served
        served |= made.kinds


def test_the_forms_controllers_come_in_the_registrys_order() -> None:
    sim = SimulatedCluster(SimulatorConfig(nodes=2, arrivals_per_hour=0, warm_start=False))
    order = [f.name for f in FORMS]
    modules = [type(f).__module__.split(".")[-2] for f in form_controllers(sim.store, sim.now())]
    assert modules == sorted(modules, key=order.index)
