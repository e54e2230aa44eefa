"""The domain: pure decisions about the queue, preemptions, quota, alerts and fairness. No I/O, no clock."""
