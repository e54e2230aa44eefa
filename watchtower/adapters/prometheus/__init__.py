"""Prometheus: reading the cluster's server (`reader`), the fairness report's week from it (`fairness`), the
demo's local server (`process`) and writing past samples into one (`backfill`).

Nothing is imported here: the reader's client library is loaded only by the modules that read.
"""
