"""Structured logs: readable text for people, JSON lines for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # fields passed with `extra=` become keys of their own
        out.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class RepeatedWarnings(logging.Filter):
    """Lets a warning (or error) through once per ``window`` seconds per logger and message
    template: an unreachable API server must not fill the log with the same two lines every
    retry. The next one let through says how many were held back. The first of each, and
    anything below WARNING, always passes."""

    def __init__(self, window: float = 60.0) -> None:
        super().__init__()
        self._window = window
        self._seen: dict[tuple[str, object], tuple[float, int]] = {}  # key -> (shown, held)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.msg)
        shown = self._seen.get(key)
        if shown is not None and record.created - shown[0] < self._window:
            self._seen[key] = (shown[0], shown[1] + 1)
            return False
        held = shown[1] if shown is not None else 0
        self._seen[key] = (record.created, 0)
        if shown is not None and held:
            since = record.created - shown[0]
            # no % in what is added: the record's own arguments still format its message
            record.msg = f"{record.msg} (and {held} more like it in the last {since:.0f}s)"
        return True


def setup(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RepeatedWarnings())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # watchfiles logs every batch of changes it sees at INFO: the manifest and logind drop-in
    # directories' changes are ours to report, once, in words
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    # urllib3 warns "Retrying (...)" for the one retry of a refused connection the client is
    # given (kube.connection): the request's own failure is what the agent reports
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
