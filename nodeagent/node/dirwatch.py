"""Watching a directory with inotify (watchfiles), so that a file that appears is seen at once
rather than at the next periodic sweep: the static pod manifests and the kubelet's
configuration drop-ins."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from watchfiles import awatch

from nodeagent.model.backoff import capped_exponential

__all__ = ["watch_directory"]

_BACKOFF = (0.5, 2.0, 30.0)  # base, factor, cap in seconds, after a failed watch


async def watch_directory(
    path: Callable[[], Path],
    *,
    changed: Callable[[], bool | None],
    failed: Callable[[Path, OSError], None],
    ready: asyncio.Event | None = None,
    timeout_ms: int = 1000,
) -> None:
    """Call `changed` on every change in the directory `path()` names at each attempt (not in
    its subdirectories), and once when the watch is first in place (then `ready` is set), as
    whatever came before is not reported. `changed` returning True asks for the watch anew
    (`path()` may name another directory now, as the parent a missing one is watched in does
    once it exists). On an error (e.g. a missing directory), call `failed` and try again,
    backing off up to 30 s; until cancelled. Never polls: a watch in place waits for changes
    (waking every `timeout_ms` to look for cancellation)."""
    attempt = 0
    while True:
        target = path()
        try:
            async for changes in awatch(
                target,
                watch_filter=None,
                recursive=False,
                debounce=200,
                # the watcher's thread takes the GIL every `step` ms to look for a stop
                # request: 20 ms cost ~0.5 % of a core on an idle node, 100 ms a fifth
                step=100,
                rust_timeout=timeout_ms,
                yield_on_timeout=True,
            ):
                attempt = 0
                anew = False
                if ready is not None and not ready.is_set():
                    ready.set()
                    anew = bool(changed())
                if changes:
                    anew = bool(changed()) or anew
                if anew:
                    break
        except OSError as e:
            attempt += 1
            failed(target, e)
        base, factor, cap = _BACKOFF
        # pacing only after a failed watch: one asked for anew starts at once
        await asyncio.sleep(capped_exponential(base, factor, attempt - 1, cap) if attempt else 0)
