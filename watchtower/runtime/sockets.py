"""The listening socket, bound before anything is built, and the URL the service answers at."""

from __future__ import annotations

import socket

from watchtower.config.model import Settings


def bind(host: str, port: int) -> socket.socket:
    """Return a listening socket on host:port (0: a free port), so the URL is known before serving.

    Raises OSError (with the address in its message) when the port cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def served_url(host: str, sock: socket.socket) -> str:
    """Return the base URL a listening socket answers at (no trailing slash); a wildcard host (0.0.0.0,
    ::) is no address to link to, so the machine's name stands for it."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def reachable_at(settings: Settings, url: str) -> Settings:
    """Return the settings with `server.external_url` set to `url` unless the configuration set it: alerts
    and pages then link to where the service actually answers, whatever port it was given."""
    if "external_url" in settings.server.model_fields_set:
        return settings
    return settings.model_copy(update={"server": settings.server.model_copy(update={"external_url": url})})
