"""The JobSet form's simulated child Jobs (controller.py) and JobSet objects (objects.py)."""
