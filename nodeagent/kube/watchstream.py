"""One watch's HTTP stream, read in a thread of its own and handed to the event loop.

Watches are long-lived: in the client's bounded request pool they would starve the requests,
so each gets a dedicated thread that feeds decoded events into an asyncio queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from typing import Any

from nodeagent.kube.errors import KubeError, ServerError, from_response, from_status, translate
from nodeagent.kube.resources import Obj

__all__ = ["WatchItem", "WatchStream"]

_READ_SIZE = 64 * 1024

# What the watch thread hands the loop: the HTTP status once the stream is open, then events,
# then None at a clean end; a KubeError at any point ends the stream.
WatchItem = int | Obj | KubeError | None


class WatchStream:
    """One streaming GET read in its own thread; `close()` (loop side) ends it promptly."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, name: str, open_response: Callable[[], Any]
    ) -> None:
        self._loop = loop
        self._name = name
        self._open = open_response
        self.queue: asyncio.Queue[WatchItem] = asyncio.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._raw: Any = None  # the urllib3 response, once open

    def start(self) -> None:
        threading.Thread(target=self._run, name="watch " + self._name, daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            raw = self._raw
        if raw is not None:
            # Unblocks the thread's pending read; closing from here would race with it.
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                raw.shutdown()

    @property
    def _is_closed(self) -> bool:
        with self._lock:
            return self._closed

    def _post(self, item: WatchItem) -> None:
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:
            # The loop is closed; nobody is listening any more.
            with self._lock:
                self._closed = True

    def _run(self) -> None:
        try:
            response = self._open()
        except Exception as exc:
            if not self._is_closed:
                self._post(translate(exc))
            return
        raw = response.response
        with self._lock:
            closed = self._closed
            self._raw = raw
        try:
            if closed:
                return
            if response.status != 200:
                self._post(
                    from_response(response.status, response.reason, raw.read(), response.headers)
                )
                return
            self._post(response.status)
            self._pump(raw)
        except Exception as exc:
            if not self._is_closed:
                self._post(translate(exc))
        finally:
            with contextlib.suppress(Exception):
                raw.close()
            with contextlib.suppress(Exception):
                raw.release_conn()

    def _pump(self, raw: Any) -> None:
        buffer = bytearray()
        while not self._is_closed:
            chunk = raw.read1(_READ_SIZE)
            if not chunk:
                break
            buffer += chunk
            start = 0
            while (end := buffer.find(b"\n", start)) >= 0:
                line = bytes(buffer[start:end])
                start = end + 1
                if line.strip() and not self._event(line):
                    return
            del buffer[:start]
        if self._is_closed:
            return
        if bytes(buffer).strip() and not self._event(bytes(buffer)):
            return
        self._post(None)

    def _event(self, line: bytes) -> bool:
        """Hand one event to the loop; False ends the stream."""
        try:
            event = json.loads(line)
        except ValueError:
            self._post(ServerError(f"malformed watch event: {line[:200]!r}", reason="BadEvent"))
            return False
        if not isinstance(event, dict):
            self._post(ServerError(f"malformed watch event: {line[:200]!r}", reason="BadEvent"))
            return False
        if event.get("type") == "ERROR":
            status = event.get("object")
            self._post(from_status(status if isinstance(status, dict) else {}))
            return False
        self._post(event)
        return True
