"""Watchtower's own Prometheus metrics (`watchtower_*`), served at /metrics.

Every metric object is created by `WatchtowerMetrics` on the registry it is given: a test builds its own
registry and nothing leaks between instances. Gauges that describe the queue are replaced as a whole after
each evaluation (a scrape never sees half of one evaluation and half of the next); counters and histograms
are fed from the state's happenings as they arrive.

By family group: `registry` (`WatchtowerMetrics`: the counters and histograms, configuration reloads, the
rendering), `queue` (the queue's gauges and the cluster source's feed health, collected per scrape) and
`fairness` (the per-team fairness gauges). Importers name the defining module; `QueueGauges`, the port
the queue gauges fill, is watchtower.ports'.
"""
