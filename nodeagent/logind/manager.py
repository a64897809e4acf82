"""A client for `org.freedesktop.login1.Manager`: shutdown signals, properties, inhibitors.

Plumbing only: it reports what logind says and decides nothing.

Subscription order matters (as in the kubelet's nodeshutdown dbus module): match rules are in
place *before* any property is read, so a shutdown that starts while we read is seen either in
the property or as a signal, never lost between the two.

logind (v255+) sends `PrepareForShutdownWithMetadata(b, a{sv})` first and then the old
`PrepareForShutdown(b)` for the same transition, and documents that order as API. So a plain
signal with the same value right after a metadata one is its companion and is dropped: every
transition is reported once, with its type when logind told us.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dbus_next.message import Message
from dbus_next.signature import Variant

from nodeagent.logind.bus import DBUS_INTERFACE, DBUS_NAME, DBUS_PATH, Bus, BusError
from nodeagent.logind.inhibitor import InhibitorLock, take_inhibitor
from nodeagent.logind.names import LOGIND_MANAGER, LOGIND_NAME, LOGIND_PATH
from nodeagent.model.names import AGENT

__all__ = [
    "KIND_UNKNOWN",
    "SHUTDOWN_KINDS",
    "InhibitorInfo",
    "Logind",
    "LogindFeatures",
    "LogindUnavailable",
    "ShutdownSignal",
    "reboot",
]

log = logging.getLogger(__name__)

KIND_UNKNOWN = "unknown"
# values of the "type" metadata (logind's handle_action_to_string for shutdown actions)
SHUTDOWN_KINDS = ("poweroff", "reboot", "halt", "kexec", "soft-reboot")

SIGNAL_PLAIN = "PrepareForShutdown"
SIGNAL_METADATA = "PrepareForShutdownWithMetadata"
PROPERTY_PREPARING = "PreparingForShutdown"
PROPERTY_PREPARING_METADATA = "PreparingForShutdownWithMetadata"
PROPERTY_DELAY_MAX = "InhibitDelayMaxUSec"


class LogindUnavailable(BusError):
    """org.freedesktop.login1 has no owner on this bus."""


@dataclass(frozen=True)
class ShutdownSignal:
    """One shutdown transition as logind reported it."""

    active: bool  # True: a shutdown starts; False: it was cancelled
    kind: str  # reboot, poweroff, halt, kexec, soft-reboot, or KIND_UNKNOWN
    source: str  # the signal or property it came from


@dataclass(frozen=True)
class InhibitorInfo:
    """One entry of `ListInhibitors()`."""

    what: str
    who: str
    why: str
    mode: str
    uid: int
    pid: int


@dataclass(frozen=True)
class LogindFeatures:
    """What introspection of /org/freedesktop/login1 showed (all False if it failed)."""

    introspected: bool
    metadata_signal: bool  # PrepareForShutdownWithMetadata (systemd 255+)
    metadata_property: bool  # PreparingForShutdownWithMetadata


def _shutdown_kind(metadata: Any) -> str:
    if isinstance(metadata, dict):
        value = metadata.get("type")
        if isinstance(value, Variant):
            value = value.value
        if isinstance(value, str) and value:
            return value
    return KIND_UNKNOWN


class Logind:
    """Talks to logind over one `Bus`. Call `subscribe()` once, then the rest."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.owner: str | None = None
        self.features = LogindFeatures(False, False, False)
        self.signals_seen = 0  # shutdown signals delivered so far (for read/signal races)
        self._on_signal: Callable[[ShutdownSignal], None] | None = None
        self._on_vanished: Callable[[str], None] | None = None
        self._companion: bool | None = None
        self._owner_changes = 0
        self._owner_from_signal: str | None = None
        self._vanished = False

    async def subscribe(
        self,
        on_signal: Callable[[ShutdownSignal], None],
        on_vanished: Callable[[str], None],
    ) -> None:
        """Watch logind's name and its shutdown signals.

        `on_signal` gets every shutdown transition once; `on_vanished` is called (once) when
        logind loses or changes its bus name, that is when it exits or restarts. Both run
        synchronously in message order. Raises `LogindUnavailable` when logind is not on the bus.
        """
        self._on_signal = on_signal
        self._on_vanished = on_vanished
        self.bus.add_signal_handler(self._on_message)
        await self.bus.add_match(
            f"type='signal',sender='{DBUS_NAME}',path='{DBUS_PATH}',"
            f"interface='{DBUS_INTERFACE}',member='NameOwnerChanged',arg0='{LOGIND_NAME}'"
        )
        changes = self._owner_changes
        owner = await self.bus.name_owner(LOGIND_NAME)
        if self._owner_changes != changes:
            # NameOwnerChanged came while we asked: it is at least as new as the answer
            owner = self._owner_from_signal or None
        if owner is None:
            raise LogindUnavailable(f"{LOGIND_NAME} is not on the bus ({self.bus.address})")
        self.owner = owner
        self.features = await self._introspect()
        if not self.features.introspected or self.features.metadata_signal:
            await self._match(SIGNAL_METADATA)
        await self._match(SIGNAL_PLAIN)
        log.debug("subscribed to logind %s (%s)", owner, self.features)

    def close(self) -> None:
        self.bus.remove_signal_handler(self._on_message)
        self._on_signal = None
        self._on_vanished = None

    async def _match(self, member: str) -> None:
        await self.bus.add_match(
            f"type='signal',sender='{LOGIND_NAME}',path='{LOGIND_PATH}',"
            f"interface='{LOGIND_MANAGER}',member='{member}'"
        )

    async def _introspect(self) -> LogindFeatures:
        try:
            node = await self.bus.introspect(LOGIND_NAME, LOGIND_PATH)
        except BusError as e:
            log.warning("cannot introspect %s %s: %s", LOGIND_NAME, LOGIND_PATH, e)
            return LogindFeatures(False, False, False)
        for iface in node.interfaces:
            if iface.name == LOGIND_MANAGER:
                signals = {s.name for s in iface.signals}
                props = {p.name for p in iface.properties}
                return LogindFeatures(
                    True, SIGNAL_METADATA in signals, PROPERTY_PREPARING_METADATA in props
                )
        log.warning("%s %s does not list %s", LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER)
        return LogindFeatures(True, False, False)

    def _on_message(self, msg: Message) -> None:
        if (
            msg.member == "NameOwnerChanged"
            and msg.interface == DBUS_INTERFACE
            and msg.sender == DBUS_NAME
        ):
            name, old, new = (str(x) for x in msg.body)
            if name != LOGIND_NAME:
                return
            self._owner_changes += 1
            self._owner_from_signal = new
            if self.owner is not None and old == self.owner and not self._vanished:
                self._vanished = True
                how = f"was replaced by {new}" if new else "left the bus"
                log.warning("logind (%s) %s", old, how)
                if self._on_vanished is not None:
                    self._on_vanished(how)
            return
        if (
            msg.interface != LOGIND_MANAGER
            or msg.path != LOGIND_PATH
            or msg.member not in (SIGNAL_PLAIN, SIGNAL_METADATA)
        ):
            return
        if self.owner is None or msg.sender != self.owner:
            log.warning(
                "ignoring %s from %s, not from logind (%s)", msg.member, msg.sender, self.owner
            )
            return
        if not msg.body or not isinstance(msg.body[0], bool):
            log.warning("ignoring %s with unexpected body %r", msg.member, msg.body)
            return
        active = msg.body[0]
        if msg.member == SIGNAL_METADATA:
            self._companion = active
            metadata = msg.body[1] if len(msg.body) > 1 else None
            signal = ShutdownSignal(active, _shutdown_kind(metadata), msg.member)
        else:
            if self._companion is active:
                self._companion = None
                log.debug("PrepareForShutdown(%s) follows its metadata twin: handled", active)
                return
            self._companion = None
            signal = ShutdownSignal(active, KIND_UNKNOWN, msg.member)
        self.signals_seen += 1
        log.info("logind: %s(%s) type=%s", msg.member, active, signal.kind)
        if self._on_signal is not None:
            self._on_signal(signal)

    # -- calls

    async def inhibit(
        self, why: str, who: str = AGENT, what: str = "shutdown", mode: str = "delay"
    ) -> InhibitorLock:
        return await take_inhibitor(self.bus, what, who, why, mode)

    async def preparing_for_shutdown(self) -> ShutdownSignal:
        """`PreparingForShutdown`, with the type from `PreparingForShutdownWithMetadata` when
        logind has that property."""
        if self.features.metadata_property:
            try:
                meta = await self._get(PROPERTY_PREPARING_METADATA)
            except BusError as e:
                log.warning("reading %s failed, falling back: %s", PROPERTY_PREPARING_METADATA, e)
            else:
                preparing = _unwrap(meta.get("preparing")) if isinstance(meta, dict) else None
                if isinstance(preparing, bool):
                    return ShutdownSignal(
                        preparing, _shutdown_kind(meta), PROPERTY_PREPARING_METADATA
                    )
        value = await self._get(PROPERTY_PREPARING)
        if not isinstance(value, bool):
            raise BusError(f"{PROPERTY_PREPARING} is {value!r}, not a boolean")
        return ShutdownSignal(value, KIND_UNKNOWN, PROPERTY_PREPARING)

    async def inhibit_delay_max_usec(self) -> int:
        value = await self._get(PROPERTY_DELAY_MAX)
        if not isinstance(value, int) or isinstance(value, bool):
            raise BusError(f"{PROPERTY_DELAY_MAX} is {value!r}, not an integer")
        return value

    async def list_inhibitors(self) -> list[InhibitorInfo]:
        reply = await self.bus.call(LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, "ListInhibitors")
        reply.close_fds()
        out = []
        for entry in reply.body[0] if reply.body else []:
            what, who, why, mode, uid, pid = entry
            out.append(InhibitorInfo(str(what), str(who), str(why), str(mode), int(uid), int(pid)))
        return out

    async def reboot(self, interactive: bool = False) -> None:
        """`Reboot(interactive)`: logind announces the shutdown (`PrepareForShutdown(true)`),
        waits for the delay inhibitors (at most InhibitDelayMaxSec), then reboots. It answers
        once the reboot is under way or delayed; `CallFailed` when it refuses (another shutdown
        already under way: `OperationInProgress`; not allowed: `AccessDenied`)."""
        reply = await self.bus.call(
            LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, "Reboot", "b", [interactive]
        )
        reply.close_fds()

    async def _get(self, name: str) -> Any:
        return await self.bus.get_property(LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, name)


async def reboot(address: str | None) -> None:
    """Ask logind on the bus at `address` (None: the system bus) to reboot, not interactively,
    on a connection of its own (the shutdown guard's may be reconnecting); `BusError` when it
    cannot be asked or refuses."""
    bus = await Bus.connect(address)
    try:
        await Logind(bus).reboot(interactive=False)
    finally:
        await bus.close()


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, Variant) else value
