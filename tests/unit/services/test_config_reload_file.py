"""The reload's reading of the file and its split of a change into what is applied and what waits for a restart,
on real files and symlinks (the wiring to the running parts is tested in tests/alerting/test_config_reload.py)."""

from __future__ import annotations

import os

import yaml

from watchtower.config import settings_from_mapping
from watchtower.config.changes import config_changes
from watchtower.config.loading import read_settings
from watchtower.services.config_reload import ConfigReloader

S1 = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
S2 = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVoxMjM0NTY="


def hook(url: str, secret: str = S1) -> dict:
    return {
        "alerting": {
            "route": {"receiver": "hook"},
            "receivers": [{"name": "hook", "webhooks": [{"url": url, "secret": secret}]}],
        }
    }


def test_routes_receivers_and_rule_settings_are_live_and_the_rest_waits_for_a_restart():
    old = settings_from_mapping(hook("http://a.example/"), env={})
    new_doc = hook("http://b.example/", secret=S2)
    new_doc["alerting"]["delivery"] = {"mode": "both", "max_attempts": 3}
    new_doc["alerting"]["alertmanagers"] = ["http://127.0.0.1:9093"]
    new_doc["alerting"]["rules"] = {"disabled": ["gang_stall"]}
    new_doc["server"] = {"port": 9090}
    new_doc["store"] = {"url": "postgresql://w@db/w"}
    got = config_changes(old, settings_from_mapping(new_doc, env={}))
    assert got.live == (
        "alerting.delivery.max_attempts",
        "alerting.receivers[0].webhooks[0].secret",  # a rotated secret is a change, though never shown
        "alerting.receivers[0].webhooks[0].url",
        "alerting.rules.disabled[0]",
        "alerting.rules.disabled[]",
    )
    assert got.restart == (
        "alerting.alertmanagers[0]",
        "alerting.alertmanagers[]",
        "alerting.delivery.mode",
        "server.port",
        "store.url",
    )
    assert not config_changes(old, settings_from_mapping(hook("http://a.example/"), env={}))


def _reloader(path, seen: list) -> ConfigReloader:
    running, _ = read_settings(path, env={})
    return ConfigReloader(
        path=path,
        running=running,
        apply=lambda s, ch: seen.append(("apply", ch.live)),
        on_problems=lambda p: seen.append(("problems", tuple(p))),
        env={},
    )


def test_an_edit_in_place_a_rewrite_with_the_same_content_and_a_yaml_error(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(hook("http://a.example/")))
    seen: list = []
    r = _reloader(path, seen)
    path.write_text(yaml.safe_dump(hook("http://a.example/")))  # touched, same bytes
    assert r.poll() is None and seen == []
    path.write_text("alerting:\n  route: [unclosed\n")
    got = r.poll()
    assert got.result == "invalid" and got.problems[0].startswith("line 3, column 1: not valid YAML")
    assert seen == [("problems", got.problems)]
    path.write_text(yaml.safe_dump(hook("http://b.example/")))
    assert r.poll().result == "applied"
    assert seen[1:] == [("apply", ("alerting.receivers[0].webhooks[0].url",)), ("problems", ())]


def test_a_file_missing_for_one_poll_is_a_swap_in_progress_and_for_two_a_problem(tmp_path):
    target = tmp_path / "v1.yaml"
    target.write_text(yaml.safe_dump(hook("http://a.example/")))
    link = tmp_path / "config.yaml"
    os.symlink(target.name, link)
    seen: list = []
    r = _reloader(link, seen)
    target.unlink()
    assert r.poll() is None  # the kubelet may be between its steps
    got = r.poll()
    assert got.result == "invalid" and got.problems == (
        f"(file): cannot read {link}: No such file or directory",
    )
    (tmp_path / "v2.yaml").write_text(yaml.safe_dump(hook("http://a.example/")))
    os.symlink("v2.yaml", tmp_path / "tmp-link")
    os.replace(tmp_path / "tmp-link", link)
    back = r.poll()
    assert back.result == "applied" and not back.changes  # the same configuration as runs
    assert seen[-1] == ("problems", ())  # and the problem is cleared
