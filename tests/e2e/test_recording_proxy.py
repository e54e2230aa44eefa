"""The relay's request-head reader (no control plane needed): it must see every request on a connection,
whatever the bodies contain and however the bytes are split, or say it lost track."""

from __future__ import annotations

from tests.e2e.recording_proxy import HeadReader, Request


def test_heads_are_read_across_splits_and_bodies_are_skipped_even_when_they_look_like_requests() -> None:
    body = b"GET /api/v1/secrets HTTP/1.1\r\n\r\n"  # a body that would fool a reader that did not skip it
    stream = (
        b"GET /api/v1/pods?limit=500 HTTP/1.1\r\nHost: x\r\n\r\n"
        + b"POST /api/v1/namespaces/a/pods HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
        + body
        + b"GET /api/v1/pods?watch=1 HTTP/1.1\r\n\r\n"
    )
    for size in (1, 7, len(stream)):
        reader = HeadReader()
        got = [r for i in range(0, len(stream), size) for r in reader.feed(stream[i : i + size])]
        assert got == [
            Request("GET", "/api/v1/pods?limit=500"),
            Request("POST", "/api/v1/namespaces/a/pods"),
            Request("GET", "/api/v1/pods?watch=1"),
        ], size
        assert reader.lost == ""


def test_a_chunked_body_is_reported_as_lost_track_rather_than_misread() -> None:
    reader = HeadReader()
    got = reader.feed(
        b"PATCH /api/v1/nodes/n HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nGET /\r\n0\r\n\r\n"
    )
    assert got == [Request("PATCH", "/api/v1/nodes/n")]
    assert reader.lost.startswith("chunked request body")
    assert reader.feed(b"GET /x HTTP/1.1\r\n\r\n") == []
