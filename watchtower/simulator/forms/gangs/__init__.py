"""The gangs form's simulated controllers (controller.py, volcano.py) and their objects (objects.py: upstream
Workload and PodGroup; volcano_objects.py)."""
