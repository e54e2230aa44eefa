"""`kubectl watchtower`: the kubectl plugin that asks Watchtower why a workload waits, what waits, and how teams
fared (console script `kubectl-watchtower`; docs/kubectl.md)."""
