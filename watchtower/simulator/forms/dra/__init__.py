"""The DRA form's simulated driver and resourceclaim controller (controller.py) and DRA objects (objects.py)."""
