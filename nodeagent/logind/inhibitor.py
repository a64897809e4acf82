"""logind inhibitor locks: `Manager.Inhibit(what, who, why, mode)` and the fd that is the lock.

logind keeps an inhibitor for as long as any copy of the returned fd is open (it watches the
other end of a FIFO), so the lock is released by closing our copy, and only ours exists: the fd
is made non-inheritable at once so child processes cannot keep it alive behind our back.
"""

from __future__ import annotations

import logging
import os
import time

from nodeagent.logind.bus import Bus, BusError
from nodeagent.logind.names import LOGIND_MANAGER, LOGIND_NAME, LOGIND_PATH

__all__ = ["InhibitorLock", "take_inhibitor"]

log = logging.getLogger(__name__)


class InhibitorLock:
    """Owns the fd of one logind inhibitor. `release()` closes it exactly once."""

    def __init__(self, fd: int, what: str, who: str, why: str, mode: str) -> None:
        self._fd: int | None = fd
        self.what = what
        self.who = who
        self.why = why
        self.mode = mode
        self.taken_at = time.monotonic()

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int | None:
        return self._fd

    def release(self) -> bool:
        """Close the fd, letting logind drop the inhibitor. Idempotent.

        Returns True when this call released the lock. A failing close(2) is logged as an
        error (on Linux the fd is gone even then, so the lock counts as released).
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return False
        try:
            os.close(fd)
        except OSError as e:
            log.error(
                "closing inhibitor fd %d (%s %s) failed: %s; the lock is released anyway",
                fd,
                self.mode,
                self.what,
                e,
            )
        else:
            log.info(
                "released the %s inhibitor lock for %s after %.1fs",
                self.mode,
                self.what,
                time.monotonic() - self.taken_at,
            )
        return True

    def __repr__(self) -> str:
        state = f"fd={self._fd}" if self._fd is not None else "released"
        return f"<InhibitorLock {self.mode} {self.what} by {self.who!r} {state}>"


async def take_inhibitor(
    bus: Bus, what: str, who: str, why: str, mode: str, timeout: float = 25.0
) -> InhibitorLock:
    """`org.freedesktop.login1.Manager.Inhibit`; raises `CallFailed` as logind answers (for
    instance `org.freedesktop.login1.OperationInProgress` for a delay lock taken while the
    shutdown it would delay is already running)."""
    reply = await bus.call(
        LOGIND_NAME,
        LOGIND_PATH,
        LOGIND_MANAGER,
        "Inhibit",
        "ssss",
        [what, who, why, mode],
        timeout=timeout,
    )
    try:
        index = reply.body[0] if reply.body else None
        if not isinstance(index, int):
            raise BusError(f"Inhibit returned {reply.body!r} instead of a unix fd")
        fd = reply.take_fd(index)
    finally:
        reply.close_fds()
    try:
        os.set_inheritable(fd, False)
    except OSError as e:
        os.close(fd)
        raise BusError(f"Inhibit returned an unusable fd {fd}: {e}") from e
    lock = InhibitorLock(fd, what, who, why, mode)
    log.info("took a %s inhibitor lock for %s (fd %d): %s", mode, what, fd, why)
    return lock
