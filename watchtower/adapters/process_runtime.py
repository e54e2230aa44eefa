"""How the service's process runs: the event loop it uses and how glibc's allocator keeps its memory.

Both are measured choices (docs/benchmarks.md, "Soak"):

- glibc gives every thread that allocates its own malloc arena (up to 8 per core). The threads here (the
  default executor's `to_thread` work, the watch readers) each grew an arena of their own and RSS climbed
  8-12 MiB a minute under load without levelling off; with two arenas the same soak stayed flat. The
  environment variable MALLOC_ARENA_MAX, when set, wins: it is read by glibc before Python starts.
- uvloop, when installed (uvicorn[standard] brings it), serves the same requests with less CPU than the
  default loop, which is what the API's p99 under 50 clients is made of.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
DEFAULT_ARENAS = 2


def limit_malloc_arenas(arenas: int = DEFAULT_ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas` unless MALLOC_ARENA_MAX is set; return whether a cap was set
    here. A libc without mallopt (musl, macOS) is left alone."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_ARENA_MAX, arenas))
    if not ok:
        log.debug("mallopt(M_ARENA_MAX, %d) refused", arenas)
    return ok


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """Return uvloop's loop factory when uvloop is installed, else None (asyncio's default loop)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
