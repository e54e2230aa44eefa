"""The process's allocator and loop choices (adapters/process_runtime.py); the soak benchmark shows their effect."""

from __future__ import annotations

import os
import subprocess
import sys


def _run(code: str, env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_arenas_capped_unless_the_operator_set_malloc_arena_max(tmp_path):
    code = "from watchtower.adapters.process_runtime import limit_malloc_arenas as f; print(f())"
    base = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _run(code, base) == "True"  # glibc here: the cap is set
    assert _run(code, {**base, "MALLOC_ARENA_MAX": "4"}) == "False"  # the operator's choice wins


def test_the_service_loop_is_uvloop_when_installed():
    code = (
        "import asyncio\nfrom watchtower.adapters.process_runtime import loop_factory\n"
        "with asyncio.Runner(loop_factory=loop_factory()) as r:\n"
        "    print(type(r.get_loop()).__module__.split('.')[0])"
    )
    assert _run(code, dict(os.environ)) == "uvloop"
