"""The one check of an http(s) address in the configuration: a scheme, a host, one printable line."""

from __future__ import annotations


def http_url(v: str, what: str, example: str) -> str:
    """Return `v`, or raise naming `what` it should have been and an example."""
    scheme, sep, rest = v.partition("://")
    host = rest.split("/", 1)[0]
    if not sep or scheme.lower() not in ("http", "https") or not host or not v.isprintable() or " " in v:
        raise ValueError(f"not an http(s) URL of {what}: {v!r} (e.g. {example})")
    return v
