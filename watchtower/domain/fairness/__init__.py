"""The weekly fairness report (DESIGN §6): the history it is computed from, what Prometheus adds, the report.

`history` holds what the service records as it watches (wait episodes, preemptions, incidents); `usage` what
the Prometheus reader aggregates on the server for a week; `report` the finished report every presenter
(HTML, email, JSON, CSV, the CLI) renders. All of it is pure values: the clock and the timezone are passed in.
"""
