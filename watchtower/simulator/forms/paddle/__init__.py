"""The PaddleJob form's simulated status write-back (controller.py) and status shape (objects.py)."""
