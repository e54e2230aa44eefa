"""The one RFC 3339 helper and the one duration formatter, in each form a user reads them."""

from __future__ import annotations

import pytest

from watchtower.domain.timefmt import format_duration, rfc3339

T = 1_800_000_000.123456  # 2027-01-15T08:00:00.123456Z


def test_rfc3339_cuts_to_the_precision_each_reader_gets():
    assert rfc3339(T) == "2027-01-15T08:00:00Z"  # the queue JSON and the API
    assert rfc3339(T, "milliseconds") == "2027-01-15T08:00:00.123Z"  # Alertmanager payloads
    assert rfc3339(T, "auto") == "2027-01-15T08:00:00.123456Z"  # GPU usage figures
    assert rfc3339(1_800_000_000.0, "auto") == "2027-01-15T08:00:00Z"
    assert rfc3339(None) is None
    # Cut, never rounded up into the next second (a wait would otherwise start before it did).
    late = 1_800_000_000.9996
    assert (rfc3339(late), rfc3339(late, "milliseconds")) == (
        "2027-01-15T08:00:00Z",
        "2027-01-15T08:00:00.999Z",
    )


@pytest.mark.parametrize(
    ("seconds", "exact", "spoken"),
    [
        (0, "0s", "0s"),
        (45.6, "46s", "45s"),
        (125, "2m5s", "2m"),
        (3900, "1h5m", "1h05m"),
        (5400, "1h30m", "1h30m"),
        (7200, "2h", "2h"),
        (90061, "1d1h1m1s", "1d1h"),
        (86400, "1d", "1d"),
    ],
)
def test_durations_exact_for_the_status_page_and_spoken_for_alerts(seconds, exact, spoken):
    assert format_duration(seconds) == exact
    assert format_duration(seconds, spoken=True) == spoken
