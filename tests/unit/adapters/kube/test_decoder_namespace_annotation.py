"""The recipients annotation is read from the Namespace object as written (checked where it is used), and
only when configured."""

from __future__ import annotations

import orjson

from watchtower.adapters.kube.decoder import ObjectDecoder

NS = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": "team-vision",
        "labels": {"team": "vision"},
        "annotations": {"watchtower.io/report-to": "cv@x.example,\r\nBcc: e@v.example", "other": "x"},
    },
}


def test_the_annotation_is_kept_as_written_when_configured() -> None:
    ns = ObjectDecoder(report_annotation="watchtower.io/report-to").decode("Namespace", orjson.dumps(NS))
    assert (ns.name, ns.team, ns.report_to) == ("team-vision", "vision", "cv@x.example,\r\nBcc: e@v.example")


def test_without_the_setting_or_the_annotation_nothing_is_kept() -> None:
    assert ObjectDecoder().decode("Namespace", orjson.dumps(NS)).report_to == ""
    bare = {**NS, "metadata": {"name": "n"}}
    assert (
        ObjectDecoder(report_annotation="watchtower.io/report-to")
        .decode("Namespace", orjson.dumps(bare))
        .report_to
        == ""
    )


def test_a_huge_annotation_is_cut() -> None:
    big = {
        **NS,
        "metadata": {**NS["metadata"], "annotations": {"watchtower.io/report-to": "a@x.example," * 10_000}},
    }
    ns = ObjectDecoder(report_annotation="watchtower.io/report-to").decode("Namespace", orjson.dumps(big))
    assert len(ns.report_to) == 2048
