"""Reading the cluster's Prometheus over prometheus-api-client: bounded time, retries, errors that say why.

The client is blocking (requests); queries run in a worker thread so the event loop never waits on them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from watchtower.domain.gpu_usage import Sample
from watchtower.ports import PromReadError

log = logging.getLogger(__name__)

_STATUS = re.compile(r"HTTP Status Code (\d+)")
_ERRNO = re.compile(r"\[Errno -?\d+\][^'\")]*")


class PrometheusError(PromReadError):
    """Prometheus could not answer a query."""


class PrometheusUnavailable(PrometheusError):
    """Prometheus is down, unreachable or failing (connection refused, 5xx, not an API answer)."""


class PrometheusTimeout(PrometheusUnavailable):
    """Prometheus did not answer within the configured timeout."""


class PrometheusQueryError(PrometheusError):
    """Prometheus rejected the query (4xx): a configuration or programming error, not an outage."""


class PrometheusReader:
    """Runs instant queries; each attempt is bounded by `timeout`, failures are retried `retries` times with
    exponential back-off, and the last failure is raised as a PrometheusError subclass."""

    def __init__(
        self,
        *,
        url: str,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep
        # One HTTP session per thread: a requests session is not safe to share across threads, and
        # query_each_sync runs queries from several.
        self._local = threading.local()
        self._clients: list[tuple[threading.Thread, PrometheusConnect]] = []
        self._lock = threading.Lock()
        self.queries_run = 0
        self.failures = 0
        self.skipped_series = 0  # malformed series dropped from answers

    @property
    def _client(self) -> PrometheusConnect:
        client: PrometheusConnect | None = getattr(self._local, "client", None)
        if client is None:
            # The library's own urllib3 retries would multiply our timeout; we retry ourselves, visibly.
            client = PrometheusConnect(
                url=self.url,
                retry=Retry(
                    total=0, read=False, raise_on_status=False
                ),  # read=False: a read timeout stays a timeout
                timeout=cast(int, self.timeout),  # annotated int; requests takes float seconds
            )
            self._local.client = client
            with self._lock:
                self._clients.append((threading.current_thread(), client))
        return client

    def _close_clients(self, *, only_dead_threads: bool) -> None:
        with self._lock:
            gone = [c for t, c in self._clients if not (only_dead_threads and t.is_alive())]
            self._clients = [(t, c) for t, c in self._clients if only_dead_threads and t.is_alive()]
        for client in gone:
            client.close()

    def close(self) -> None:
        self._close_clients(only_dead_threads=False)

    def query_sync(self, promql: str, *, at: float | None = None) -> list[Sample]:
        """Return the instant-query result at `at` (default: Prometheus' now) as samples."""
        params: dict[str, Any] = {"timeout": f"{self.timeout:g}s"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        last: PrometheusError | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            try:
                result = self._client.custom_query(promql, params=params)
                self.queries_run += 1
                samples, skipped = _samples(result)
                self.skipped_series += skipped
                return samples
            except PrometheusQueryError:
                self.failures += 1
                raise
            except PrometheusError as e:
                last = e
            except requests.Timeout as e:
                last = PrometheusTimeout(f"{self.url}: no answer within {self.timeout:g}s")
                last.__cause__ = e
            except requests.ConnectionError as e:
                last = PrometheusUnavailable(f"{self.url}: cannot connect ({_reason(e)})")
                last.__cause__ = e
            except PrometheusApiClientException as e:
                m = _STATUS.search(str(e))
                code = int(m.group(1)) if m else 0
                if 400 <= code < 500 and code not in (408, 429):
                    self.failures += 1
                    raise PrometheusQueryError(f"{self.url} rejected the query: {_short(e)}") from e
                last = PrometheusUnavailable(f"{self.url}: {_short(e)}")
                last.__cause__ = e
            except (ValueError, KeyError, TypeError) as e:  # a 200 that is not a Prometheus API answer
                last = PrometheusUnavailable(f"{self.url}: not a Prometheus API response ({_short(e)})")
                last.__cause__ = e
            log.info("prometheus query attempt %d/%d failed: %s", attempt + 1, self.retries + 1, last)
        self.failures += 1
        assert last is not None
        raise last

    def query_many_sync(self, queries: Sequence[str], *, at: float | None = None) -> list[list[Sample]]:
        return [self.query_sync(q, at=at) for q in queries]

    def query_each_sync(
        self, queries: Sequence[tuple[str, float]], *, workers: int = 2
    ) -> list[list[Sample]]:
        """Run each (query, time) with up to `workers` at once (Prometheus evaluates concurrent queries on
        its cores) and return the results in order; the first failure is raised once all have ended."""
        if workers <= 1 or len(queries) <= 1:
            return [self.query_sync(q, at=at) for q, at in queries]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prom-query") as pool:
            futures = [pool.submit(self.query_sync, q, at=at) for q, at in queries]
            concurrent.futures.wait(futures)
        # The pool's threads have ended: their sessions would otherwise stay open until close().
        self._close_clients(only_dead_threads=True)
        return [f.result() for f in futures]

    async def query(self, promql: str, *, at: float | None = None) -> list[Sample]:
        return await asyncio.to_thread(self.query_sync, promql, at=at)

    async def query_many(self, queries: Sequence[str], *, at: float | None = None) -> list[list[Sample]]:
        """Run the queries one after the other in one worker thread (the HTTP session is not shared across
        threads) and return their results in order; the first failure ends the batch."""
        return await asyncio.to_thread(self.query_many_sync, queries, at=at)


def _reason(e: BaseException) -> str:
    """Return the OS reason of a connection failure without the request URL (the whole query) around it."""
    m = _ERRNO.search(str(e))
    return m.group(0).strip() if m else type(e).__name__


def _short(e: BaseException) -> str:
    text = str(e)
    return text if len(text) <= 300 else text[:300] + "…"


def _samples(result: object) -> tuple[list[Sample], int]:
    if not isinstance(result, list):
        raise PrometheusUnavailable(f"expected a vector result, got {type(result).__name__}")
    out: list[Sample] = []
    skipped = 0
    for item in result:
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            out.append(Sample(labels, float(item["value"][1])))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            skipped += 1
            log.warning("skipping a malformed series in a Prometheus answer: %.200r", item)
    return out, skipped
