"""The Kueue form's simulated controller (controller.py) and Kueue's objects (objects.py)."""
