"""The weekly send killed with SIGKILL while the SMTP server takes a message, then restarted (the job runs
again at start): every recipient gets its report, the job adds nothing the second time, and the one email
in flight arrives at most twice, both with the same Message-ID. A real store file, a real SMTP server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from email import message_from_bytes, policy
from pathlib import Path

from aiosmtpd.controller import Controller

from tests.alerting.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
RECIPIENTS = {"cv@x.example", "lead@x.example", "nlp@x.example", "ops@x.example", "vision@x.example"}


class HoldingInbox:
    """Records each message when its data has arrived, then, while `hold` is set, does not answer: the
    sender is stuck in the middle of its send."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []
        self.hold = threading.Event()
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd handler hook
        with self.lock:
            self.messages.append((list(envelope.rcpt_tos), envelope.original_content))
        while self.hold.is_set():
            await asyncio.sleep(0.05)
        return "250 OK"


def child(db: Path, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reports.send_child", str(db), str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_send_and_restart_sends_each_report_once_but_the_one_in_flight_at_most_twice(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    inbox = HoldingInbox()
    inbox.hold.set()
    port = free_port()
    ctl = Controller(inbox, hostname="127.0.0.1", port=port)
    ctl.start()
    procs = []
    try:
        first = child(db, port)
        procs.append(first)
        deadline = time.monotonic() + 120
        while not inbox.messages and time.monotonic() < deadline:
            time.sleep(0.05)
        assert inbox.messages, "the first run never sent"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        assert first.stdout is not None and first.stdout.read().strip() == "enqueued 5"
        inbox.hold.clear()
        second = child(db, port)
        procs.append(second)
        assert second.wait(180) == 0
        assert second.stdout is not None and second.stdout.read().strip() == "enqueued 0"  # the job, again
        third = child(db, port)  # a restart after everything was sent
        procs.append(third)
        assert third.wait(180) == 0
        assert third.stdout is not None and third.stdout.read().strip() == "enqueued 0"
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        ctl.stop()
    got = [(rcpts, message_from_bytes(data, policy=policy.default)) for rcpts, data in inbox.messages]
    per = Counter(r for rcpts, _ in got for r in rcpts)
    assert set(per) == RECIPIENTS  # nothing lost
    in_flight = inbox.messages[0][0]
    assert len(in_flight) == 1 and per[in_flight[0]] == 2  # the one being sent when killed: once more
    assert all(n == 1 for r, n in per.items() if r != in_flight[0])  # every other: exactly once
    assert len(got) == len(RECIPIENTS) + 1
    copies = [m for rcpts, m in got if rcpts == in_flight]
    assert copies[0]["Message-ID"] == copies[1]["Message-ID"]  # a mail system can drop the duplicate
    assert (
        copies[0].get_body(preferencelist=("html",)).get_content()
        == copies[1].get_body(preferencelist=("html",)).get_content()
    )
    assert len({m["Message-ID"] for _, m in got}) == len(RECIPIENTS)
