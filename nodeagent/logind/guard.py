"""The shutdown guard: hold a logind delay lock and hand shutdowns to the node-side flow.

    connect -> subscribe -> take the lock -> read PreparingForShutdown -> wait for signals
       ^                                                                      |
       +------ jittered backoff <-- bus lost / logind left or restarted <-----+

The guard decides nothing about *when* a shutdown may go on. It calls the handler's
`on_shutdown(kind)` when a shutdown starts (or is found under way at start-up) and releases
the lock when that returns; `on_shutdown` is where "Drained", "budget nearly spent" and "API
server unreachable" are weighed (nodeagent.node.shutdown). On `PrepareForShutdown(false)` it
cancels a still-running `on_shutdown`, makes sure a lock is held again, and calls
`on_cancel()`.

The drop-in (`dropin.ensure_dropin`) is seen to in a task of its own once connected, so a slow
logind reload never delays taking the lock; it is retried on each new connection until it holds.

Handler calls run one at a time, in the order of logind's transitions, in a task of their
own, so a slow handler never stops the guard from seeing the bus go away or a cancel arrive.

Reconnecting is make-before-break: the new lock is taken before the old one is closed (after
a dbus-daemon restart the old fd is often still a valid lock). While a shutdown is under way
logind refuses new delay locks (`OperationInProgress`); then the lock we have is kept until
`on_shutdown` returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nodeagent.config import ShutdownConfig
from nodeagent.logind.bus import Bus, BusClosed, BusError, CallFailed
from nodeagent.logind.dropin import DropinResult, ensure_dropin
from nodeagent.logind.fdstore import FdStore
from nodeagent.logind.inhibitor import InhibitorLock
from nodeagent.logind.manager import InhibitorInfo, Logind, ShutdownSignal
from nodeagent.logind.names import ERROR_OPERATION_IN_PROGRESS
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.names import AGENT

__all__ = ["DEFAULT_WHY", "ShutdownGuard", "ShutdownHandler"]

log = logging.getLogger(__name__)

DEFAULT_WHY = "Draining the node (NodeMaintenance) before it shuts down"
RECONNECT = JitteredBackoff(base=0.2, cap=30.0, jitter=0.5)


class ShutdownHandler(Protocol):
    """The node-side shutdown flow, as the guard sees it."""

    async def on_shutdown(self, kind: str) -> object:
        """A shutdown started (`kind`: reboot, poweroff, halt, kexec, soft-reboot or unknown).

        Return (anything; the value is ignored) when the lock may be released; raising
        releases it too. Cancelled (asyncio) when logind cancels the shutdown first (the lock
        is kept) or the guard stops (the lock is released). Must be bounded: logind itself
        stops waiting after InhibitDelayMaxSec (`ShutdownGuard.inhibit_delay_max`)."""

    async def on_cancel(self) -> object:
        """logind cancelled the shutdown (`PrepareForShutdown(false)`). Called once a running
        `on_shutdown` has finished being cancelled; meanwhile the guard takes a new lock."""


@dataclass(frozen=True)
class _Vanished:
    how: str


class ShutdownGuard:
    """Holds a `delay` inhibitor for `shutdown` for as long as `run()` runs."""

    def __init__(
        self,
        config: ShutdownConfig,
        handler: ShutdownHandler,
        *,
        why: str = DEFAULT_WHY,
        reconnect: JitteredBackoff = RECONNECT,
        fdstore: FdStore | None = None,
        inherited: Sequence[tuple[int, str]] = (),
    ) -> None:
        """`fdstore`: where a copy of each lock is kept so it outlives the process;
        `inherited`: (fd, name) of the locks an earlier run left there (fdstore.inherited_fds),
        taken back at start."""
        self._address = config.dbus_address
        self._budget = config.budget
        self._dropin: Path | None = config.logind_dropin if config.manage_dropin else None
        self._handler = handler
        self._why = why
        self._reconnect = reconnect
        self._fdstore = fdstore
        self._inherited = list(inherited)

        self._lock: InhibitorLock | None = None
        self._logind: Logind | None = None
        self._preparing = False  # logind's state as we last learnt it
        # handler calls in flight, in order; the value says whether it is an on_shutdown
        self._flows: dict[asyncio.Task[None], bool] = {}

        self.lock_held_event = asyncio.Event()  # set while we hold a lock
        self.lock_free_event = asyncio.Event()  # set while we do not
        self.lock_free_event.set()
        self.connected_event = asyncio.Event()  # set while connected and subscribed
        self._change = asyncio.Event()  # set (and replaced) on every change of the above

        self.dropin_result: DropinResult | None = None
        # the drop-in has been seen to (or failed, or is not ours to manage)
        self.dropin_settled = self._dropin is None
        self.inhibit_delay_max: float | None = None  # seconds, as logind last reported it
        self.shutdown_kind: str | None = None
        self.sessions = 0  # connections that got as far as subscribing
        self.reconnects = 0  # connections lost or failed (each followed by a backoff)

    # -- observation

    @property
    def lock_held(self) -> bool:
        return self._lock is not None and self._lock.held

    @property
    def connected(self) -> bool:
        return self.connected_event.is_set()

    @property
    def preparing_for_shutdown(self) -> bool:
        return self._preparing

    async def wait_lock(self, held: bool = True) -> None:
        """Return once the lock is held (or, with `held=False`, not held)."""
        await (self.lock_held_event if held else self.lock_free_event).wait()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` is true; it is re-checked whenever the lock, the
        connection or logind's shutdown state changes."""
        while not predicate():
            await self._change.wait()

    def _changed(self) -> None:
        change, self._change = self._change, asyncio.Event()
        change.set()

    async def list_inhibitors(self) -> list[InhibitorInfo]:
        """logind's `ListInhibitors()`, for diagnostics; raises `BusClosed` when disconnected."""
        logind = self._logind
        if logind is None:
            raise BusClosed("the shutdown guard is not connected to logind")
        return await logind.list_inhibitors()

    # -- main loop

    async def run(self) -> None:
        """Run until cancelled; on the way out cancel the handler and release the lock."""
        self._adopt_inherited()
        attempt = 0
        try:
            while True:
                subscribed_before = self.sessions
                try:
                    await self._session()
                except BusError as e:
                    log.warning("shutdown guard: %s", e)
                except Exception:
                    log.exception("shutdown guard: unexpected error on the D-Bus connection")
                if self.sessions != subscribed_before:
                    attempt = 0
                attempt += 1
                delay = self._reconnect.delay(attempt)
                self.reconnects += 1
                self._changed()
                log.info(
                    "shutdown guard: reconnecting to D-Bus in %.2fs (lock %s)",
                    delay,
                    "still held" if self.lock_held else "not held",
                )
                await asyncio.sleep(delay)
        finally:
            await self._stop()

    def _adopt_inherited(self) -> None:
        """Locks from the fd store: a crash or restart of the agent did not let a shutdown go;
        keep one (the session then replaces it, or keeps it while logind takes no new lock)."""
        if not self._inherited or self._fdstore is None:
            return
        locks = [InhibitorLock.adopt(fd, name, self._fdstore) for fd, name in self._inherited]
        self._inherited.clear()
        *extra, self._lock = locks
        for lock in extra:
            lock.release()
        self._update_events()

    async def _stop(self) -> None:
        flows = list(self._flows)
        for t in flows:
            t.cancel()
        # release before waiting: a second cancellation must not leave the lock behind. The fd
        # store keeps its copy: a restart takes it back, a stop for good lets systemd close it
        self._release("the shutdown guard stops", keep_stored=True)
        if flows:
            await asyncio.wait(flows)

    async def _session(self) -> None:
        bus = await Bus.connect(self._address)
        events: asyncio.Queue[ShutdownSignal | _Vanished] = asyncio.Queue()
        logind = Logind(bus)
        tasks: list[asyncio.Future[Any]] = []
        try:
            await logind.subscribe(events.put_nowait, lambda how: events.put_nowait(_Vanished(how)))
            await self._acquire(logind)
            seen = logind.signals_seen
            state = await logind.preparing_for_shutdown()
            if logind.signals_seen == seen:
                # logind's state now (a signal that came while we read is newer and queued):
                # taken in before we say we are connected, so READY and the status report it
                await self._on_state(state)
            try:
                self.inhibit_delay_max = await logind.inhibit_delay_max_usec() / 1e6
            except BusError as e:
                log.warning("cannot read InhibitDelayMaxUSec: %s", e)
            self._logind = logind
            self.sessions += 1
            self.connected_event.set()
            self._changed()
            log.info(
                "shutdown guard: connected to logind %s on %s (%s), lock %s, InhibitDelayMaxSec %s",
                logind.owner,
                bus.address,
                "with shutdown metadata" if logind.features.metadata_signal else "no metadata",
                "held" if self.lock_held else "NOT held",
                self.inhibit_delay_max,
            )
            if self._dropin is not None and not (self.dropin_result and self.dropin_result.holds):
                tasks.append(asyncio.ensure_future(self._ensure_dropin(bus, self._dropin)))
            closed = asyncio.ensure_future(bus.wait_closed())
            tasks.append(closed)
            while True:
                getter = asyncio.ensure_future(events.get())
                tasks.append(getter)
                await asyncio.wait([getter, closed], return_when=asyncio.FIRST_COMPLETED)
                tasks.remove(getter)
                if not getter.done():
                    getter.cancel()
                    err = closed.result()
                    raise BusClosed(f"D-Bus connection lost: {err!r}" if err else "D-Bus closed")
                event = getter.result()
                if isinstance(event, _Vanished):
                    raise BusClosed(f"logind {event.how}")
                await self._on_state(event)
        finally:
            self.connected_event.clear()
            self._changed()
            self._logind = None
            for t in tasks:
                t.cancel()
            logind.close()
            await bus.close()

    async def _ensure_dropin(self, bus: Bus, path: Path) -> None:
        try:
            result = await ensure_dropin(bus, self._budget, path)
        except Exception:
            log.exception("ensuring the logind drop-in %s failed", path)
            self.dropin_settled = True
            self._changed()
            return
        self.dropin_result = result
        self.dropin_settled = True
        if result.holds:
            log.info("logind drop-in %s holds: %s", path, result.describe())
        else:
            log.warning("logind drop-in %s does not hold: %s", path, result.describe())
        if result.actual_usec is not None:
            self.inhibit_delay_max = result.actual_usec / 1e6
        self._changed()

    # -- logind's state

    async def _on_state(self, sig: ShutdownSignal) -> None:
        if sig.active == self._preparing:
            log.debug("shutdown guard: %s(%s) changes nothing", sig.source, sig.active)
            return
        self._preparing = sig.active
        self._changed()
        if sig.active:
            self.shutdown_kind = sig.kind
            log.warning(
                "shutdown (%s) under way (%s); lock %s until the node-side flow lets go",
                sig.kind,
                sig.source,
                "held" if self.lock_held else "NOT held",
            )
            self._start_flow(lambda: self._shutdown_flow(sig.kind), shutdown=True)
            return
        log.warning("shutdown cancelled (%s)", sig.source)
        self.shutdown_kind = None
        for task, is_shutdown in self._flows.items():
            if is_shutdown:
                task.cancel()
        # on_cancel runs whatever happens to the new lock: if taking it fails, the session
        # ends and the next one takes it
        self._start_flow(self._cancel_flow, shutdown=False)
        logind = self._logind
        if logind is not None and not self.lock_held:
            await self._acquire(logind)

    def _start_flow(self, fn: Callable[[], Awaitable[None]], *, shutdown: bool) -> None:
        """Run `fn` after every handler call already in flight has finished."""
        previous = list(self._flows)

        async def chained() -> None:
            if previous:
                await asyncio.wait(previous)
            await fn()

        task = asyncio.create_task(
            chained(), name="shutdown-guard-on-shutdown" if shutdown else "shutdown-guard-on-cancel"
        )
        self._flows[task] = shutdown
        task.add_done_callback(self._flow_done)

    def _flow_done(self, task: asyncio.Task[None]) -> None:
        self._flows.pop(task, None)
        if not task.cancelled() and (e := task.exception()) is not None:
            log.error("shutdown guard: handler task failed", exc_info=e)

    async def _shutdown_flow(self, kind: str) -> None:
        try:
            await self._handler.on_shutdown(kind)
        except asyncio.CancelledError:
            # the shutdown was cancelled (keep the lock) or the guard stops (it releases)
            raise
        except Exception:
            log.exception("on_shutdown(%s) failed; releasing the lock, the shutdown goes on", kind)
        if self._preparing:
            self._release(f"the node-side flow let the {kind} go on")

    async def _cancel_flow(self) -> None:
        try:
            await self._handler.on_cancel()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("on_cancel failed")

    # -- the lock

    async def _acquire(self, logind: Logind) -> None:
        try:
            new = await logind.inhibit(self._why, who=AGENT)
        except CallFailed as e:
            if e.name == ERROR_OPERATION_IN_PROGRESS:
                log.warning(
                    "logind is already shutting down and takes no new delay lock (%s); %s",
                    e.text,
                    "keeping the lock we have" if self.lock_held else "no lock is held",
                )
                return
            raise
        if self._fdstore is not None:
            new.keep_in_store(self._fdstore)
        old, self._lock = self._lock, new
        self._update_events()
        if old is not None:
            old.release()

    def _release(self, reason: str, keep_stored: bool = False) -> None:
        lock, self._lock = self._lock, None
        if lock is not None and lock.held:
            log.info("releasing the shutdown delay lock: %s", reason)
            lock.release(keep_stored)
        self._update_events()

    def _update_events(self) -> None:
        if self.lock_held:
            self.lock_free_event.clear()
            self.lock_held_event.set()
        else:
            self.lock_held_event.clear()
            self.lock_free_event.set()
        self._changed()
