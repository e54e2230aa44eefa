"""The service's log lines: one format, the chatty libraries quieted."""

from __future__ import annotations

import logging


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per tick is noise
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per webhook is noise
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # the demo SMTP sink logs every SMTP verb
