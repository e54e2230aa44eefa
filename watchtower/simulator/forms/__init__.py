"""The queue forms' simulated controllers, one package per form the simulator produces, named as the form in
watchtower/domain/forms/registry.py: its `controller` module (the hooks of simulator/hooks.py) and its
objects as the API server serves them. A registered form with no package here is not simulated.

Kept free of imports: the core imports the forms' object builders, and this package runs first.
"""
