"""Who is sent which weekly report, and the keys and headers that make each send once and safe."""

from __future__ import annotations

from watchtower.domain.fairness.recipients import (
    Recipient,
    message_id,
    one_line,
    parse_addresses,
    report_recipients,
    send_key,
)


def test_an_annotation_gives_its_valid_addresses_and_names_the_refused_ones() -> None:
    good, bad = parse_addresses(" a@x.example, ,b@y.example,evil@x.example\r\nBcc: c@z.example,<x@y>,no-at ")
    assert good == ["a@x.example", "b@y.example"]
    assert bad == ["evil@x.example\r\nBcc: c@z.example", "<x@y>", "no-at"]


def test_platform_addresses_get_the_whole_report_and_teams_their_own_once_each() -> None:
    got = report_recipients(
        teams=["nlp", "vision", "speech"],
        platform=["Lead@x.example"],
        configured={"nlp": ["nlp@x.example", "lead@x.example"], "vision": ["shared@x.example"]},
        annotated={"vision": ["ignored@x.example"], "speech": ["shared@x.example", "speech@x.example"]},
    )
    assert got == [
        Recipient("Lead@x.example", None),  # also on nlp's list: the whole report has nlp's part
        Recipient("nlp@x.example", ("nlp",)),
        Recipient("shared@x.example", ("speech", "vision")),  # one email with both teams
        Recipient("speech@x.example", ("speech",)),
    ]


def test_the_configured_list_wins_over_the_annotation_for_a_team() -> None:
    got = report_recipients(
        teams=["vision"], platform=[], configured={"vision": []}, annotated={"vision": ["a@x.example"]}
    )
    assert got == []  # configured as nobody: the annotation does not add anyone


def test_the_send_key_is_per_week_and_address_whatever_the_case() -> None:
    assert send_key("2026-W47", "Lead@X.example") == "fairness:2026-W47:lead@x.example"
    assert send_key("2026-W47", "a@x.example") != send_key("2026-W48", "a@x.example")


def test_the_message_id_is_stable_and_carries_no_address_text() -> None:
    k = send_key("2026-W47", "a@x.example")
    mid = message_id(k, "x.example")
    assert mid == message_id(k, "x.example") and mid.startswith("<fairness.") and mid.endswith("@x.example>")
    assert "a@x" not in mid
    assert message_id(send_key("2026-W47", "b@x.example"), "x.example") != mid


def test_a_subject_is_one_line_whatever_a_name_holds() -> None:
    assert one_line("report: team a\r\nBcc: evil@x\u2028y\x00z") == "report: team a Bcc: evil@x y z"
    assert len(one_line("x" * 500, 100)) == 100
