"""A headless Chromium (Debian `chromium`) driven over the DevTools protocol: load a page at a given width,
collect what its console and log say, evaluate expressions in it, take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# Each table's header cells against the cells of its first full data row, column by column: the computed
# text-align of a header and of the figures under it (a "none" row spanning the table is no column). Read on
# the fairness report page and the status page, whose numeric headers once sat left over right-aligned figures.
HEADER_ALIGN = """[...document.querySelectorAll('table')].flatMap(t => {
  const head = [...t.rows].find(r => r.querySelector('th'));
  const row = [...t.rows].find(r => !r.querySelector('th') && r.cells.length === (head ? head.cells.length : -1));
  if (!head || !row) return [];
  return [...head.cells].map((h, i) => ({
    header: h.textContent, header_align: getComputedStyle(h).textAlign, cell_align: getComputedStyle(row.cells[i]).textAlign,
  }));
})"""


class Page:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(
        self,
        event: str,
        timeout: float = 60,
        *,
        since: int = 0,
        where: Callable[[dict[str, Any]], bool] = lambda p: True,
    ) -> int:
        """Wait for `event` among the events from index `since` on (and matching `where` on its params);
        return the index just after it."""
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self.events[since:], start=since):
            if e.get("method") == event and where(e.get("params", {})):
                return i + 1
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            self.events.append(msg)
            if msg.get("method") == event and where(msg.get("params", {})):
                return len(self.events)
        raise TimeoutError(event)

    def evaluate(self, expression: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def errors(self) -> list[str]:
        """Return what the page's console and log reported as errors (script errors, CSP violations, failed
        loads)."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(str(p.get("exceptionDetails", {}).get("text")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(
            self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        )
        path.write_bytes(data)
        return data


@contextlib.contextmanager
def chromium_page(url: str, *, width: int, height: int = 900, mobile: bool = True) -> Iterator[Page]:
    """Yield the page at `url`, loaded in a fresh headless Chromium with a viewport `width` CSS px wide."""
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (tests/setup/system-deps.sh installs it)")
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its renderer and helpers in one group, ended together below
        )
        try:
            assert proc.stderr is not None
            port = None
            deadline = time.monotonic() + 60
            while port is None and time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line and proc.poll() is not None:
                    raise RuntimeError("chromium exited before listening")
                m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
                port = int(m.group(1)) if m else None
            assert port is not None, "chromium never said where DevTools listens"
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:  # noqa: S310
                target = next(t for t in json.load(r) if t["type"] == "page")
            with connect(target["webSocketDebuggerUrl"], max_size=64 * 2**20, open_timeout=30) as ws:
                page = Page(ws)
                for domain in ("Runtime", "Log", "Page"):
                    page.call(f"{domain}.enable")
                page.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=mobile,
                )
                # The blank first page can fire its own load event after Page.enable (seen on a busy
                # machine, the page then read before its images): wait for the load after our navigation.
                since = len(page.events)
                page.call("Page.navigate", url=url)
                after = page.wait_for(
                    "Page.frameNavigated",
                    since=since,
                    where=lambda p: (
                        not p.get("frame", {}).get("url", "").startswith("about:")
                        and not p.get("frame", {}).get("parentId")
                    ),
                )
                page.wait_for("Page.loadEventFired", since=after)
                yield page
        finally:
            _end_group(proc)


def _end_group(proc: subprocess.Popen[str]) -> None:
    """Kill Chromium and the helpers it started, and wait until all are gone: killed alone, its helpers
    still wrote into the profile while it was being removed ("Directory not empty: 'Default'", 4 runs
    in 8)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
