"""The gangs form: upstream Workloads and PodGroups (gang scheduling), Volcano's PodGroups and Queues."""
