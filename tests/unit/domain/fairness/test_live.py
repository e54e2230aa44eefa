"""The fairness of the moment per team (the live gauges' figures) and where entitlement comes from, by hand."""

import pytest

from watchtower.domain.fairness.live import Pool, entitled_gpus, fairness_now

NO_QUOTA: dict[str, float] = {}


def test_used_waiting_and_entitled_give_demand_fair_share_and_satisfaction() -> None:
    # 16 GPUs. a uses 10 and waits for 6 more (D 16), b uses 2 and waits for 4 (D 6), c uses 4 (D 4).
    # Max-min over (16, 6, 4): 16/3 each; c needs 4, the other 12 split: a 6, b 6 (b asks exactly 6).
    got = fairness_now(
        16,
        {"a": 10, "b": 2, "c": 4},
        {"a": 6, "b": 4},
        {"a": (8, "quota"), "b": (4, "quota"), "c": (4, "quota")},
    )
    assert {t: (n.demand, n.fair_share) for t, n in got.items()} == {
        "a": (16, pytest.approx(6)),
        "b": (6, pytest.approx(6)),
        "c": (4, pytest.approx(4)),
    }
    # x = min(1, U / min(D, F)): a 10/6 → 1, b 2/6, c 4/4.
    assert {t: n.satisfaction for t, n in got.items()} == {"a": 1.0, "b": pytest.approx(1 / 3), "c": 1.0}
    assert got["a"].entitled == 8


def test_a_team_only_entitled_has_no_demand_and_no_satisfaction() -> None:
    got = fairness_now(8, {"a": 8}, {}, {"a": (4, "weight"), "idle": (4, "weight")})
    assert got["idle"].demand == 0 and got["idle"].satisfaction is None
    assert got["a"].satisfaction == 1.0


def test_quota_entitlement_is_each_teams_quota_as_a_share_of_capacity() -> None:
    got = entitled_gpus(48, ["a", "b", "c"], mode="quota", quotas={"a": 40, "b": 40}, weights={})
    assert got == {"a": (24.0, "quota"), "b": (24.0, "quota"), "c": (0.0, "quota")}


def test_without_quotas_or_queues_auto_shares_by_weight_with_one_for_teams_not_named() -> None:
    got = entitled_gpus(30, ["a", "b"], mode="auto", quotas=NO_QUOTA, weights={"a": 2})
    assert got == {"a": (20.0, "weight"), "b": (10.0, "weight")}


def test_auto_goes_team_by_team_kueue_then_volcano_then_quota() -> None:
    # a and b share a 16-GPU ClusterQueue (8 each, a's Volcano Queue and quota are not read); c has a
    # Volcano Queue; d only a quota (8 of the 16 GPUs of quota: half the capacity); e nothing.
    got = entitled_gpus(
        64,
        ["a", "b", "c", "d", "e"],
        mode="auto",
        quotas={"a": 8, "d": 8},
        weights={},
        kueue=[Pool(16, ("a", "b"))],
        volcano=[Pool(32, ("a", "c"))],
    )
    assert got == {
        "a": (8.0, "kueue"),
        "b": (8.0, "kueue"),
        "c": (16.0, "volcano"),
        "d": (32.0, "quota"),
        "e": (0.0, "none"),
    }


def test_a_configured_mode_the_cluster_cannot_give_entitles_no_one() -> None:
    got = entitled_gpus(64, ["a"], mode="volcano", quotas={"a": 8}, weights={})
    assert got == {"a": (0.0, "volcano")}
