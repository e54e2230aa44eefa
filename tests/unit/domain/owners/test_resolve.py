"""Owner resolution and the annotation values refused: the annotation first, then the team contact."""

from __future__ import annotations

import pytest

from watchtower.domain.owners.resolve import (
    NOTIFY_ANNOTATION,
    Contact,
    OwnerPolicy,
    check_annotation,
    resolve_owner,
)

POLICY = OwnerPolicy(
    contacts=(
        Contact(team="vision", email=("vision-oncall@corp.example",)),
        Contact(namespace="nlp-prod", receiver="nlp-slack"),
        Contact(team="nlp", email=("nlp@corp.example",)),
    ),
    allowed_domains=frozenset({"corp.example"}),
    allowed_receivers=frozenset({"nlp-slack"}),
)


def owner_of(value: str | None, *, ns: str = "vision-dev", team: str = "vision"):
    notes = {NOTIFY_ANNOTATION: value} if value is not None else {}
    return resolve_owner(namespace=ns, team=team, annotations=notes, policy=POLICY)


def test_the_annotation_names_the_owner_before_the_team_contact():
    r = owner_of("Ana@corp.example, bo@ml.corp.example")
    assert r.owner is not None and r.owner.emails == ("ana@corp.example", "bo@ml.corp.example")
    assert r.owner.source == "annotation"


def test_without_annotation_the_namespace_contact_wins_over_the_team_contact():
    assert owner_of(None, ns="nlp-prod", team="nlp").owner.receiver == "nlp-slack"
    assert owner_of(None, ns="nlp-dev", team="nlp").owner.emails == ("nlp@corp.example",)
    assert owner_of(None, ns="x", team="nobody").owner is None


def test_an_annotation_may_name_an_allowed_receiver():
    assert owner_of("nlp-slack").owner.receiver == "nlp-slack"


def test_off_opts_out_even_of_the_team_contact():
    r = owner_of("off")
    assert r.owner is None and r.opted_out


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("ana@corp.example\r\nBcc: everyone@corp.example", "header_injection"),
        ("ana@corp.example\nX: y", "header_injection"),
        (",".join(f"u{i}@corp.example" for i in range(10_000)), "too_long"),
        (",".join(f"u{i}@corp.example" for i in range(11)), "too_many"),
        ("http://127.0.0.1:9093/hook", "url"),
        ("https://hooks.corp.example/x", "url"),
        ("ana@evil.example", "domain_not_allowed"),
        ("ana@corp.example.evil.example", "domain_not_allowed"),
        ("ana@corp.example, eve@evil.example", "domain_not_allowed"),
        ("default", "receiver_not_allowed"),
        ("Ana <ana@corp.example>", "malformed"),
        ("ana@[127.0.0.1]", "malformed"),
        ("x" * 2048, "too_long"),
    ],
)
def test_hostile_values_are_refused_with_their_reason_and_the_team_contact_is_used(value, reason):
    owner, why = check_annotation(value, POLICY)
    assert owner is None and why == reason
    r = owner_of(value)
    assert r.refused == reason
    assert r.owner is not None and r.owner.emails == ("vision-oncall@corp.example",)
    assert "\n" not in r.detail and "\r" not in r.detail and len(r.detail) <= 80 * 4


def test_ten_addresses_are_the_cap_by_default():
    ten = ",".join(f"u{i}@corp.example" for i in range(10))
    owner, why = check_annotation(ten, POLICY)
    assert why is None and owner is not None and len(owner.emails) == 10


def test_owner_ids_are_stable_and_name_no_address():
    a = owner_of("ana@corp.example,bo@corp.example").owner
    b = owner_of("bo@corp.example, ana@corp.example").owner
    assert a.id == b.id and "corp" not in a.id
