"""The tests' one way to wait for a condition: `await until(holds)`.

`until` re-checks `holds()` whenever `changed` (an `asyncio.Event` the code under watch sets on
every change) is set; without one it re-checks every `poll` seconds, for state nothing announces
(another thread's, or a task's internals). On a fake-time loop (tests/faketime.py) the polling
costs no wall time. It fails with a `TimeoutError` naming what it waited for.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

__all__ = ["until"]


async def until(
    holds: Callable[[], object],
    *,
    what: str | None = None,
    changed: asyncio.Event | None = None,
    timeout: float = 20.0,
    poll: float = 0.01,
) -> None:
    """Return once `holds()` is true; `what` names it in the failure (else its source)."""
    try:
        async with asyncio.timeout(timeout):
            while not holds():
                if changed is None:
                    await asyncio.sleep(poll)
                else:
                    changed.clear()
                    await changed.wait()
    except TimeoutError:
        raise TimeoutError(
            f"still waiting after {timeout:g}s for: {what or _describe(holds)}"
        ) from None


def _describe(holds: Callable[[], object]) -> str:
    """The predicate's source line (a lambda's is its call site), else its name."""
    try:
        return inspect.getsource(holds).strip()
    except (OSError, TypeError):
        return getattr(holds, "__qualname__", repr(holds))
