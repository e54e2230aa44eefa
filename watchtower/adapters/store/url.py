"""Which database a store URL names (`StoreLocation`, resolved once), and the URL as it may be shown: with its
password masked."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

MASK = "***"


class StoreUrlError(ValueError):
    """A store URL that names no database Watchtower can use; the message never holds its password."""


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """Where the state store is: resolved once from the settings and handed to every opener of the store."""

    kind: Literal["sqlite", "postgresql"]
    location: str  # the SQLite file, or the PostgreSQL URL (password and all: never log it, log `shown`)
    shown: str  # the same with any password masked


def masked(url: str) -> str:
    """Return `url` with the password of its user part and any `password=` parameter replaced by ***."""
    out = re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@?#]*):[^@/?#]*@", rf"\1:{MASK}@", url)
    return re.sub(r"(?i)([?&]password=)[^&#]*", rf"\1{MASK}", out)


def scrub(text: str, *secrets: str) -> str:
    """Return `text` with each non-empty secret (and its URL-decoded form) replaced by ***."""
    for s in secrets:
        for form in {s, unquote(s)}:
            if form:
                text = text.replace(form, MASK)
    return text


def password_of(url: str) -> str:
    """Return the password written in a URL's user part, or ''."""
    try:
        return urlsplit(url).password or ""
    except ValueError:
        return ""


def store_target(url: str) -> StoreLocation:
    """Return what a `store.url` names: `sqlite:///abs/path`, `sqlite:relative/path` or a plain path
    (SQLite), or `postgresql://` / `postgres://` (PostgreSQL). Raise StoreUrlError otherwise."""
    scheme, sep, rest = url.partition(":")
    if not sep or "/" in scheme or len(scheme) == 1:  # a plain path (or a Windows drive letter)
        if not url:
            raise StoreUrlError("store.url is empty")
        return StoreLocation("sqlite", url, url)
    scheme = scheme.lower()
    if scheme == "sqlite":
        path = rest[2:] if rest.startswith("//") else rest
        if not path:
            raise StoreUrlError(f"{url!r} names no file: sqlite:///absolute/path or sqlite:relative/path")
        return StoreLocation("sqlite", unquote(path), url)
    if scheme in ("postgresql", "postgres"):
        return StoreLocation("postgresql", url, masked(url))
    raise StoreUrlError(
        f"{masked(url)!r}: unknown database {scheme!r}; use sqlite:///path, a plain path or postgresql://..."
    )


def resolve_store(url: str | None, default_path: str) -> StoreLocation:
    """Return where the state store is: what `url` names (store_target), else the SQLite file at
    `default_path`. Raise StoreUrlError for a URL naming no database Watchtower can use."""
    return store_target(url) if url else StoreLocation("sqlite", default_path, default_path)
