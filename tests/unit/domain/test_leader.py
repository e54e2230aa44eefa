"""Leader election's decisions: who may take the Lease, what is written, when a leader must stop."""

from __future__ import annotations

import pytest

from watchtower.domain.leader import (
    LeaseRecord,
    Step,
    Timings,
    claimed,
    decide,
    deposed,
    released,
)

T = Timings()  # client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry
NOW = 1_800_000_000.0


def held(by: str, *, renewed: float, transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(by, 15, renewed - 100, renewed, transitions, "42")


def test_no_lease_is_created_and_held_from_the_first_transition() -> None:
    assert decide(None, identity="a", now=NOW) is Step.CREATE
    r = claimed(None, identity="a", now=NOW, timings=T)
    assert (r.holder, r.duration, r.acquire_time, r.renew_time, r.transitions) == ("a", 15, NOW, NOW, 0)


def test_a_live_lease_of_another_replica_keeps_this_one_waiting_until_it_runs_out() -> None:
    lease = held("b", renewed=NOW - 14.9)
    assert decide(lease, identity="a", now=NOW) is Step.STANDBY
    assert decide(lease, identity="a", now=NOW + 0.1) is Step.ACQUIRE


def test_taking_over_counts_one_transition_and_keeps_the_resource_version_for_the_optimistic_update() -> None:
    lease = held("b", renewed=NOW - 20, transitions=3)
    r = claimed(lease, identity="a", now=NOW, timings=T)
    assert (r.holder, r.transitions, r.acquire_time, r.renew_time) == ("a", 4, NOW, NOW)
    assert r.resource_version == "42"


def test_renewing_its_own_lease_keeps_the_acquire_time_and_the_transition_count() -> None:
    lease = held("a", renewed=NOW - 2, transitions=7)
    assert decide(lease, identity="a", now=NOW) is Step.RENEW
    r = claimed(lease, identity="a", now=NOW, timings=T)
    assert (r.transitions, r.acquire_time, r.renew_time) == (7, lease.acquire_time, NOW)


def test_its_own_lease_is_renewed_even_after_it_ran_out_when_nobody_took_it() -> None:
    # Same term: no other replica led in between, so nothing was sent under another's transition.
    lease = held("a", renewed=NOW - 60, transitions=7)
    assert decide(lease, identity="a", now=NOW) is Step.RENEW
    assert claimed(lease, identity="a", now=NOW, timings=T).transitions == 7


def test_a_released_lease_is_taken_at_once_whatever_its_renew_time() -> None:
    lease = released(held("b", renewed=NOW - 1, transitions=5), now=NOW)
    assert (lease.holder, lease.duration, lease.transitions) == ("", 1, 5)
    assert decide(lease, identity="a", now=NOW) is Step.ACQUIRE
    assert claimed(lease, identity="a", now=NOW, timings=T).transitions == 6


def test_a_lease_never_renewed_is_free() -> None:
    lease = LeaseRecord("b", 15, None, None, 0, "1")
    assert decide(lease, identity="a", now=NOW) is Step.ACQUIRE


def test_the_lease_written_says_the_configured_duration_in_whole_seconds_never_less() -> None:
    r = claimed(None, identity="a", now=NOW, timings=Timings(4.5, 3, 1))
    assert r.duration == 5


def test_a_leader_stops_at_the_renew_deadline_counted_from_when_its_last_renewal_was_sent() -> None:
    assert not deposed(renewed_at=100.0, now=109.9, timings=T)
    assert deposed(renewed_at=100.0, now=110.0, timings=T)
    assert deposed(renewed_at=None, now=0.0, timings=T)


def test_a_leader_stops_before_any_follower_may_take_over_by_the_margin_between_deadline_and_lease() -> None:
    lease = claimed(None, identity="a", now=NOW, timings=T)
    stops = NOW + T.renew_deadline  # its own clock, from when it sent the renewal
    assert decide(lease, identity="b", now=stops) is Step.STANDBY
    # A follower whose clock runs up to lease − deadline fast still waits for the leader to stop.
    assert (
        decide(lease, identity="b", now=stops + (T.lease_duration - T.renew_deadline) - 0.01) is Step.STANDBY
    )


@pytest.mark.parametrize(
    ("timings", "problem"),
    [
        (Timings(10, 10, 2), "lease_duration must be longer than renew_deadline"),
        (Timings(15, 2.4, 2), "renew_deadline must be longer than 1.2 × retry_period"),
    ],
)
def test_timings_that_would_let_two_leaders_overlap_or_give_no_second_try_are_refused(
    timings: Timings, problem: str
) -> None:
    assert timings.problems() == [problem]
    assert Timings().problems() == []


def test_a_lease_runs_out_by_how_long_this_replica_saw_it_unchanged_whatever_the_holders_renew_time() -> None:
    # renewTime from a holder whose clock is two minutes behind this replica's: by renewTime alone the
    # Lease looks long expired; seen unchanged for less than its duration, it is still held.
    lease = LeaseRecord("b", T.lease_seconds, NOW - 120, NOW - 120, 0, "7")
    assert decide(lease, identity="a", now=NOW) is Step.ACQUIRE  # what comparing clocks would do
    assert decide(lease, identity="a", now=NOW, unchanged_for=T.lease_duration - 0.1) is Step.STANDBY
    assert decide(lease, identity="a", now=NOW, unchanged_for=T.lease_duration) is Step.ACQUIRE
    # And two minutes ahead: renewTime in this replica's future, the Lease not renewed for its duration.
    ahead = LeaseRecord("b", T.lease_seconds, NOW + 120, NOW + 120, 0, "7")
    assert decide(ahead, identity="a", now=NOW, unchanged_for=T.lease_duration) is Step.ACQUIRE
