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
    """Lets a warning (or error) through once per ``window`` seconds per logger, message
    template and arguments but exceptions: an unreachable API server must not fill the log with
    the same two lines every retry (whose exceptions differ, by a connection's address say),
    while warnings that share a template but not what they are about (``"%s"``, another
    maintenance, another resource) are each said. The next one let through says how many were
    held back. The first of each, and anything below WARNING, always passes."""

    def __init__(self, window: float = 60.0) -> None:
        super().__init__()
        self._window = window
        # key -> (shown, held)
        self._seen: dict[tuple[str, object, tuple[str, ...]], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.msg, _about(record.args))
        shown = self._seen.get(key)
        if shown is not None and record.created - shown[0] < self._window:
            self._seen[key] = (shown[0], shown[1] + 1)
            return False
        held = shown[1] if shown is not None else 0
        if shown is None and len(self._seen) >= _REMEMBERED:
            self._forget(record.created)
        self._seen[key] = (record.created, 0)
        if shown is not None and held:
            since = record.created - shown[0]
            # no % in what is added: the record's own arguments still format its message
            record.msg = f"{record.msg} (and {held} more like it in the last {since:.0f}s)"
        return True

    def _forget(self, now: float) -> None:
        """Drop what its window has passed for (the next of those passes anyway): warnings
        about many objects (pods, maintenances) leave no growing memory."""
        for key, (shown, _) in list(self._seen.items()):
            if now - shown >= self._window:
                del self._seen[key]


_REMEMBERED = 1024
"""Warnings remembered before those whose window has passed are forgotten."""


def _about(args: object) -> tuple[str, ...]:
    """What a record is about: its arguments as text, but for exceptions (what went wrong, which
    a retry words anew)."""
    if isinstance(args, tuple):
        return tuple(str(a) for a in args if not isinstance(a, BaseException))
    return () if args is None or isinstance(args, BaseException) else (str(args),)


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
