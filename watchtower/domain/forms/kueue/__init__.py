"""The Kueue form: a queued job suspended with no pods, its Workload saying why it waits; ClusterQueues,
LocalQueues, WorkloadPriorityClasses, and the positions of Kueue's visibility API."""
