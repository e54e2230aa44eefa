"""A silence saved by a version that matched with Python's `re` may hold a pattern RE2 refuses (a lookahead,
a backreference): the store still loads it, listed as it was, muting nothing, instead of failing every tick
that reads the silences."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.silences import new_silence

T0 = 1_800_000_000.0


def test_a_stored_silence_with_a_pattern_re2_refuses_loads_and_mutes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "alerts.db"
    store = SQLiteAlertStore(path)
    ok = new_silence(
        id="s1",
        matchers=[Matcher.of("namespace", "=~", "kube-.*")],
        starts_at=T0,
        ends_at=T0 + 3600,
        created_by="oncall",
        comment="old",
        now=T0,
    )
    store.put_silence(ok)
    store.close()
    # As the previous version wrote it: the same row with a lookahead only Python's `re` accepted.
    db = sqlite3.connect(path)
    body = orjson.loads(db.execute("SELECT body FROM silences WHERE id = 's1'").fetchone()[0])
    body["matchers"] = [["namespace", "=~", "(?!kube-).*"], ["team", "!~", "(a)\\1"]]
    db.execute("UPDATE silences SET body = ? WHERE id = 's1'", (orjson.dumps(body),))
    db.commit()
    db.close()

    store = SQLiteAlertStore(path)
    try:
        (s,) = store.silences()
        assert [str(m) for m in s.matchers] == ['namespace=~"(?!kube-).*"', 'team!~"(a)\\\\1"']
        assert not s.mutes({"namespace": "vision", "team": "x"}, T0 + 60)
        assert not s.mutes({"namespace": "kube-system", "team": "aa"}, T0 + 60)
    finally:
        store.close()
