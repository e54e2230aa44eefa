"""Every PromQL expression Watchtower runs or ships, named and documented, one module per kind of series.

- `names`: the series every query reads: the exporters' metrics, Watchtower's own `watchtower_*` series,
  the recording rules it ships.
- `syntax`: the text every builder shares: durations, the window rule, braces, aggregation, `NamedQuery`.
- `own`: `OwnQueries`, over Watchtower's own series, each aggregated the one way that series allows.
- `exporters`: `ExporterQueries` over dcgm-exporter and kube-state-metrics, from one `QueryConfig`.
- `fairness`: `FairnessQueries`, the fairness report's week figures and per-step recording rules.

The service, the dashboards and the rule generators build their queries from these, so a label spelling or a
selector is fixed once for all of them. Import from the submodule that holds a name.
"""
