"""Polling for conditions the tests cannot be notified about (threads, other tasks' state)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(cond: Callable[[], object], within: float = 5.0, step: float = 0.01) -> None:
    async with asyncio.timeout(within):
        while not cond():  # noqa: ASYNC110 - nothing to wait on but the condition itself
            await asyncio.sleep(step)
