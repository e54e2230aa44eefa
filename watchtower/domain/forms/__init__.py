"""The queue forms' domain slices, one package per form beyond pods and their controllers.

Each holds the form's records (`records`), the tables that hold them (`tables`), its part of the
cluster state that applies its objects (`part`, registered as `QueueForm.part` in its `form`, built by
`parts.FormParts`), and what it adds to a
workload's wait (`wait`, `messages`, ...), run as its step of the workload's facts (`facts`, registered as
its `QueueForm.facts`). The kinds each form watches are in domain/kinds.py.
"""
