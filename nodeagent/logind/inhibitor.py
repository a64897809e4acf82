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
from nodeagent.logind.fdstore import FdStore
from nodeagent.logind.names import LOGIND_MANAGER, LOGIND_NAME, LOGIND_PATH
from nodeagent.model.names import AGENT

__all__ = ["InhibitorLock", "take_inhibitor"]

log = logging.getLogger(__name__)


class InhibitorLock:
    """Owns the fd of one logind inhibitor. `release()` closes it exactly once, and removes the
    copy kept in the service manager's fd store, if any."""

    def __init__(
        self,
        fd: int,
        what: str,
        who: str,
        why: str,
        mode: str,
        store: FdStore | None = None,
        stored_as: str | None = None,
    ) -> None:
        self._fd: int | None = fd
        self.what = what
        self.who = who
        self.why = why
        self.mode = mode
        self.taken_at = time.monotonic()
        self._store = store
        self.stored_as = stored_as  # its name in the fd store, while a copy is kept there

    @classmethod
    def adopt(cls, fd: int, name: str, store: FdStore) -> InhibitorLock:
        """A lock an earlier run of the agent left in the fd store (what it inhibits is not
        known here: we only ever store our shutdown delay locks)."""
        log.info("took back inhibitor fd %d (%s) from the service manager's fd store", fd, name)
        return cls(fd, "shutdown", AGENT, "adopted from the fd store", "delay", store, name)

    def keep_in_store(self, store: FdStore) -> bool:
        """Hand a copy of the fd to the service manager, so the lock outlives this process."""
        if self._fd is None or not store.enabled:
            return False
        name = store.new_name()
        if not store.store(self._fd, name):
            return False
        self._store, self.stored_as = store, name
        return True

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int | None:
        return self._fd

    def release(self, keep_stored: bool = False) -> bool:
        """Close the fd, letting logind drop the inhibitor. Idempotent.

        With `keep_stored`, the copy in the fd store stays: the service manager hands it to
        the agent's next start, or closes it when the unit stops for good.

        Returns True when this call released the lock. A failing close(2) is logged as an
        error (on Linux the fd is gone even then, so the lock counts as released).
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return False
        # the stored copy first: while it is kept, closing ours releases nothing
        if self._store is not None and self.stored_as is not None and not keep_stored:
            if not self._store.remove(self.stored_as):
                log.error(
                    "the fd store still holds inhibitor %s: logind waits for it until its "
                    "InhibitDelayMaxSec",
                    self.stored_as,
                )
            self.stored_as = None
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
                "%s the %s inhibitor lock for %s after %.1fs",
                f"closed (the fd store keeps {self.stored_as})" if self.stored_as else "released",
                self.mode,
                self.what,
                time.monotonic() - self.taken_at,
            )
        return True

    def __repr__(self) -> str:
        state = f"fd={self._fd}" if self._fd is not None else "released"
        if self.stored_as:
            state += f" stored as {self.stored_as}"
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
