"""Max-min fair shares, satisfaction and Jain's index, computed by hand."""

import pytest

from watchtower.domain.fairness.shares import jain_index, max_min_shares, satisfaction
from watchtower.domain.fairness.week import IsoWeek


def test_a_team_asking_less_than_its_split_leaves_the_rest_to_the_others() -> None:
    # 100 over three: a asks 10 (gets it), b and c split the remaining 90.
    assert max_min_shares(100, {"a": 10, "b": 80, "c": 80}) == pytest.approx({"a": 10, "b": 45, "c": 45})


def test_weights_split_the_capacity_in_proportion() -> None:
    got = max_min_shares(90, {"a": 100, "b": 100}, {"a": 2})
    assert got == pytest.approx({"a": 60, "b": 30})


def test_shares_never_exceed_demand_when_capacity_is_plenty() -> None:
    assert max_min_shares(1000, {"a": 10, "b": 0}) == {"a": 10, "b": 0}


def test_a_team_with_no_demand_is_left_out_of_jains_index() -> None:
    xs = {"a": satisfaction(50, 100, 50), "b": satisfaction(10, 100, 50), "idle": satisfaction(0, 0, 0)}
    assert xs["idle"] is None
    # x = (1, 0.2): (1.2)² / (2 · 1.04)
    assert jain_index(xs) == pytest.approx(1.44 / 2.08)


def test_iso_weeks_read_and_bound_in_a_timezone() -> None:
    from zoneinfo import ZoneInfo

    w = IsoWeek.parse("2026-W44")
    start, end = w.bounds(ZoneInfo("Europe/Berlin"))
    # Europe leaves summer time on Sunday 25 October 2026, inside W43; W44 is a plain 168-hour week.
    assert (end - start) / 3600 == 168
    assert (
        IsoWeek.parse("2026-W43").bounds(ZoneInfo("Europe/Berlin"))[1]
        - IsoWeek.parse("2026-W43").bounds(ZoneInfo("Europe/Berlin"))[0]
    ) / 3600 == 169
    assert str(w.previous()) == "2026-W43" and str(IsoWeek.parse("2027-W01").previous()) == "2026-W53"
    with pytest.raises(ValueError, match="YYYY-Www"):
        IsoWeek.parse("2026-47")
    with pytest.raises(ValueError, match="no ISO week 54"):
        IsoWeek.parse("2026-W54")
