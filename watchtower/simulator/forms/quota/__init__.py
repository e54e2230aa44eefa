"""The quota form's simulated ResourceQuotas and their admission (controller.py)."""
