"""Pods and the core objects they name: the scheduler's queue (`PodScheduled=False`)."""
