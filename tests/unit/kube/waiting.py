"""`eventually`, kept for test_client.py and test_evictionrequest_views.py only until they
call `tests.until.until` (their owners' change); nothing new should import it."""

from __future__ import annotations

from collections.abc import Callable

from tests.until import until


async def eventually(cond: Callable[[], object], within: float = 5.0, step: float = 0.01) -> None:
    await until(cond, timeout=within, poll=step)
