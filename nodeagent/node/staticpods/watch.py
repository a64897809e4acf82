"""Watching the manifest directory with inotify (watchfiles), so that a manifest that appears is
seen at once rather than at the next periodic sweep."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from watchfiles import awatch

__all__ = ["watch_directory"]

_WATCH_TIMEOUT_MS = 1000


async def watch_directory(
    path: Callable[[], Path],
    *,
    ready: asyncio.Event,
    changed: Callable[[], None],
    failed: Callable[[OSError], None],
) -> None:
    """Call `changed` on every change in the directory `path()` names at each attempt (not in
    its subdirectories), and once when the watch is first in place (then `ready` is set), as
    whatever came before is not reported. On an error (e.g. a missing directory), call `failed`
    and try again, backing off up to 30 s; until cancelled."""
    attempt = 0
    while True:
        try:
            async for changes in awatch(
                path(),
                watch_filter=None,
                recursive=False,
                debounce=200,
                # the watcher's thread takes the GIL every `step` ms to look for a stop
                # request: 20 ms cost ~0.5 % of a core on an idle node, 100 ms a fifth
                step=100,
                rust_timeout=_WATCH_TIMEOUT_MS,
                yield_on_timeout=True,
            ):
                attempt = 0
                if not ready.is_set():
                    ready.set()
                    changed()
                if changes:
                    changed()
        except OSError as e:
            attempt += 1
            failed(e)
        await asyncio.sleep(min(30.0, 0.5 * 2**attempt))
