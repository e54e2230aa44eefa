"""The gated form's simulated controllers: Kueue's plain-pod integration and Volcano's queue gate."""
