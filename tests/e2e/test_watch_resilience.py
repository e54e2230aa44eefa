"""Scenario 6: the service's watch survives an API server restart and a 410 without missing or repeating
a preemption. The feed is the real adapter (`KubeSource`) feeding the real `Ingestor`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.e2e.api import wait_for
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.feed import Feed
from tests.e2e.scenario import Scenario
from watchtower.domain.state import PreemptionSeen

pytestmark = pytest.mark.e2e


@pytest.fixture
def no_watch_cache(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The API server without its watch cache: watches go to etcd, so a compaction gives a certain 410."""
    control_plane.restart_apiserver(watch_cache=False)
    try:
        yield control_plane
    finally:
        control_plane.restart_apiserver(watch_cache=True)


def test_restart_and_410_mid_watch_miss_no_preemption_and_repeat_none(
    no_watch_cache: ControlPlane, scenario: Scenario
) -> None:
    cp, s = no_watch_cache, scenario
    feed = Feed(cp.kubeconfig, backoff_base=0.2, backoff_cap=2.0, watch_timeout=60.0)
    feed.start()
    try:
        s.node("gpu-w1", gpus=4)
        low = s.namespace("e2e-watch", team="vision")
        workers = s.gang(low, "bert", workers=2, gpus=2, priority_class="batch", terminate_seconds=20)
        uids = {w["metadata"]["uid"] for w in workers}
        s.wait_running(low, [w["metadata"]["name"] for w in workers])
        wait_for(
            "the feed to see both workers running",
            lambda: feed.read(lambda st: all(u in st.pods and st.pods[u].phase == "Running" for u in uids)),
        )
        lists_before = feed.source.kind_health("Pod").relists

        # Hold the feed at its next change, as a slow consumer would be held.
        feed.gate.clear()
        s.api.merge_patch(f"/api/v1/namespaces/{low}", {"metadata": {"labels": {"poke": "1"}}})
        wait_for("the feed held at the gate", feed.held.is_set)

        cp.restart_apiserver()  # mid-watch: every watch connection of the feed is cut
        s.gang(low, "urgent", workers=1, gpus=4, priority_class="urgent-debug")
        wait_for(
            "both workers preempted and the Preempted events written",
            lambda: (
                len(s.events(low, "Preempted")) == 2
                and all(
                    p["metadata"].get("deletionTimestamp")
                    for p in s.pods(low)
                    if p["metadata"]["uid"] in uids
                )
            ),
        )
        cp.compact_etcd()  # the feed's resourceVersions are now history: 410 Gone
        feed.gate.set()

        wait_for(
            "the feed to re-list pods after the 410",
            lambda: feed.source.kind_health("Pod").relists > lists_before,
            timeout=60,
        )
        wait_for(
            "the feed to know both preemptions and their preemptor",
            lambda: feed.read(
                lambda st: (
                    # The feed sees the whole cluster: earlier scenarios' preemptions may still be there.
                    {u for u, p in st.ledger.preemptions.items() if p.victim_namespace == low} == uids
                    and all(st.ledger.preemptions[u].preemptor_uid for u in uids)
                )
            ),
            timeout=60,
        )
        # Victims finish terminating, the preemptor binds: more MODIFIED/DELETED and events arrive.
        wait_for(
            "the preemptor running in the feed's picture",
            lambda: feed.read(
                lambda st: any(p.name == "urgent-worker-0" and p.phase == "Running" for p in st.pods.values())
            ),
            timeout=90,
        )
        assert feed.failure() is None
        new = Counter(
            h.preemption.victim_uid
            for h in feed.happenings
            # The feed sees the whole cluster: earlier scenarios' events may still be there.
            if isinstance(h, PreemptionSeen) and h.new and h.preemption.victim_namespace == low
        )
        assert dict(new) == dict.fromkeys(uids, 1), "each preemption reported once, none missed"
        state_preemptions = feed.read(lambda st: dict(st.ledger.preemptions))
        for uid in uids:
            p = state_preemptions[uid]
            assert p.reason == "PreemptionByScheduler"
            assert p.victim_gpus == 2
            assert p.preemptor_name == "" or p.preemptor_name == "urgent-worker-0"
        assert feed.ingestor.skipped == Counter()
    finally:
        feed.stop()
