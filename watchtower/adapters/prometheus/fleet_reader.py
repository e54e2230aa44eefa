"""The global engine's answers, cut by cluster: one query `by (cluster, ...)` serves every cluster.

The fleet report computes each cluster's figures with the single-cluster reader (PrometheusFairness), so
they are those of the cluster's own report. Run as they are against the engine, its expressions would add
the clusters together; narrowed to one cluster each, they would be asked once per cluster. Instead each is
asked once with the cluster label kept in every aggregation (domain/promql/fleet.py's `keep_label`), and
the answer is split by that label: a cluster's view hands its reader only its own samples, the label taken
off, as its own Prometheus would have answered.
"""

from __future__ import annotations

import threading

from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.domain.gpu_usage import Sample
from watchtower.domain.promql.fleet import keep_label


class FleetAnswers:
    """The engine's answers by (expression, time), each split into cluster → samples. Samples without the
    label (a constant such as `vector(0)`) go to each cluster that has none of its own."""

    def __init__(self, reader: PrometheusReader, label: str) -> None:
        self.reader = reader
        self.label = label
        self._answers: dict[tuple[str, float | None], dict[str, list[Sample]]] = {}
        self._unlabelled: dict[tuple[str, float | None], list[Sample]] = {}
        self._lock = threading.Lock()
        self.sent: list[
            tuple[str, float | None]
        ] = []  # what the engine was asked, in order (bench/report.py)

    def for_cluster(self, expr: str, at: float | None, cluster: str) -> list[Sample]:
        key = (expr, at)
        with self._lock:
            got = self._answers.get(key)
        if got is None:
            kept = keep_label(expr, self.label)
            samples = self.reader.query_sync(kept, at=at)
            split: dict[str, list[Sample]] = {}
            bare: list[Sample] = []
            for s in samples:
                name = s.labels.get(self.label)
                if name is None:
                    bare.append(s)
                    continue
                rest = {k: v for k, v in s.labels.items() if k != self.label}
                split.setdefault(name, []).append(Sample(rest, s.value))
            with self._lock:
                self._answers[key], self._unlabelled[key] = split, bare
                self.sent.append((kept, at))
            got = split
        return got.get(cluster) or list(self._unlabelled.get(key, ()))

    def clusters_seen(self) -> set[str]:
        """The cluster names any answer so far carried."""
        with self._lock:
            return set().union(*(a.keys() for a in self._answers.values())) if self._answers else set()


class ClusterView(PrometheusReader):
    """A PrometheusReader answering as `cluster`'s own Prometheus would, from the shared FleetAnswers. Only
    query_sync is replaced: the batch methods call it."""

    def __init__(self, answers: FleetAnswers, cluster: str) -> None:
        inner = answers.reader
        super().__init__(url=inner.url, timeout=inner.timeout, retries=0)
        self.answers = answers
        self.cluster = cluster

    def query_sync(self, promql: str, *, at: float | None = None) -> list[Sample]:
        self.queries_run += 1
        return self.answers.for_cluster(promql, at, self.cluster)
