"""Owner notices: who owns a waiting workload, what they may be told, and how often (issue 33 part 1)."""
