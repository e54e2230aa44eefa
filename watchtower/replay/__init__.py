"""Policy replay: a week of jobs (a trace) run through a policy (tiers, quotas, nodes, preemption) by an
event-driven engine, and the waits, preemptions and fairness that come out.

Pure code, as the domain is (no I/O, no clock), but a package of its own beside it rather than inside
`watchtower.domain`: the policy is a pydantic model that reuses the configuration's tier section
(`watchtower.config.model.TierConfig`), and the domain may not import the configuration. The import-linter
contract "The replay is pure" keeps it to the domain and the config model.
"""
