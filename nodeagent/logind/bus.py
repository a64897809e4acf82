"""A small asyncio D-Bus connection: calls with timeouts, match rules, signals, disconnection.

This is the only module that touches dbus-next's `MessageBus` directly. It speaks the low-level
message API (no proxy objects), so every call states its signature and every unix fd that
arrives in a reply is accounted for: the caller takes the ones it wants, `Reply.close_fds()`
closes the rest, and a reply that arrives after its call timed out has its fds closed here
(a late `Inhibit` reply would otherwise hold a lock nobody knows about).

dbus-next 0.2 never closes the socket of a finished connection; `Bus.close()` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbus_next import introspection as intr
from dbus_next.aio.message_bus import MessageBus
from dbus_next.constants import BusType, MessageType
from dbus_next.message import Message
from dbus_next.signature import Variant

__all__ = [
    "DBUS_INTERFACE",
    "DBUS_NAME",
    "DBUS_PATH",
    "Bus",
    "BusClosed",
    "BusError",
    "CallFailed",
    "Reply",
]

log = logging.getLogger(__name__)

DBUS_NAME = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"
DBUS_INTERFACE = "org.freedesktop.DBus"
PROPERTIES_INTERFACE = "org.freedesktop.DBus.Properties"
INTROSPECTABLE_INTERFACE = "org.freedesktop.DBus.Introspectable"

# the reference implementation's default method call timeout
DEFAULT_CALL_TIMEOUT = 25.0
CONNECT_TIMEOUT = 10.0

SignalHandler = Callable[[Message], None]


class BusError(Exception):
    """Talking to the bus failed (not connected, connection lost, call failed or timed out)."""


class BusClosed(BusError):
    """The connection is closed or was lost while waiting."""


class CallFailed(BusError):
    """The peer answered a method call with a D-Bus error (or did not answer in time)."""

    def __init__(self, member: str, name: str, text: str) -> None:
        super().__init__(f"{member}: {name}: {text}" if text else f"{member}: {name}")
        self.member = member
        self.name = name
        self.text = text


@dataclass
class Reply:
    """The body of a method return; `fds` are the unix fds that came with it (we own them)."""

    body: list[Any]
    fds: list[int] = field(default_factory=list)

    def take_fd(self, index: int) -> int:
        """The fd a 'h' argument refers to; the caller owns it and must close it."""
        if not 0 <= index < len(self.fds) or self.fds[index] < 0:
            raise BusError(f"reply names unix fd #{index} but carries {len(self.fds)}")
        fd = self.fds[index]
        self.fds[index] = -1
        return fd

    def close_fds(self) -> None:
        """Close every fd of the reply that nobody took."""
        for i, fd in enumerate(self.fds):
            if fd >= 0:
                self.fds[i] = -1
                try:
                    os.close(fd)
                except OSError as e:
                    log.error("closing unix fd %d of a D-Bus reply failed: %s", fd, e)


def _close_message_fds(msg: Message | None) -> None:
    if msg is not None and msg.unix_fds:
        Reply(list(msg.body), list(msg.unix_fds)).close_fds()


class Bus:
    """One connection to a D-Bus daemon. Create it with `await Bus.connect(address)`."""

    def __init__(self, bus: MessageBus, address: str) -> None:
        self._bus = bus
        self.address = address
        self._closed: asyncio.Future[BaseException | None] = (
            asyncio.get_running_loop().create_future()
        )
        self._watch = asyncio.ensure_future(self._watch_disconnect())
        self._signal_handlers: list[SignalHandler] = []
        self._bus.add_message_handler(self._on_message)

    @classmethod
    async def connect(cls, address: str | None = None, timeout: float = CONNECT_TIMEOUT) -> Bus:
        """Connect to `address` (a D-Bus address such as `unix:path=/run/dbus/system_bus_socket`)
        or, when None, to the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket).

        Unix fd passing is negotiated: logind's `Inhibit` answers with a file descriptor.
        """
        where = address or "the system bus"
        # MessageBus() connects the socket in its constructor and leaves it open when that
        # fails; build it in two steps to be able to close it
        raw = MessageBus.__new__(MessageBus)
        try:
            if address is None:
                raw.__init__(bus_type=BusType.SYSTEM, negotiate_unix_fd=True)  # type: ignore[misc]
            else:
                raw.__init__(bus_address=address, negotiate_unix_fd=True)  # type: ignore[misc]
        except (OSError, ValueError) as e:
            _close_socket(raw)
            raise BusClosed(f"cannot connect to D-Bus at {where}: {e}") from e
        try:
            async with asyncio.timeout(timeout):
                await raw.connect()
        except BaseException as e:
            _abandon(raw)
            if isinstance(e, asyncio.CancelledError):
                raise
            if isinstance(e, TimeoutError):
                raise BusClosed(f"D-Bus at {where} did not answer within {timeout}s") from e
            raise BusClosed(f"cannot connect to D-Bus at {where}: {e!r}") from e
        return cls(raw, where)

    # -- state

    @property
    def connected(self) -> bool:
        return bool(self._bus.connected) and not self._closed.done()

    @property
    def unique_name(self) -> str | None:
        name = self._bus.unique_name
        return str(name) if name is not None else None

    async def wait_closed(self) -> BaseException | None:
        """Return when the connection is gone: the error that ended it, or None if closed by us."""
        return await asyncio.shield(self._closed)

    async def _watch_disconnect(self) -> None:
        err: BaseException | None = None
        try:
            await self._bus.wait_for_disconnect()  # type: ignore[no-untyped-call]
        except asyncio.CancelledError:
            raise
        except Exception as e:
            err = e
        if not self._closed.done():
            self._closed.set_result(err)
        _close_socket(self._bus)

    async def close(self) -> None:
        """Disconnect and release the socket. Safe to call more than once."""
        if not self._closed.done():
            with contextlib.suppress(OSError):
                # dbus-next logs its own warning when the socket is already shut down
                self._bus.disconnect()  # type: ignore[no-untyped-call]
            try:
                async with asyncio.timeout(5.0):
                    await asyncio.shield(self._closed)
            except TimeoutError:
                log.warning("D-Bus connection to %s did not close within 5s", self.address)
        if not self._closed.done():
            self._closed.set_result(None)
        self._watch.cancel()
        _close_socket(self._bus)

    # -- calls

    async def call(
        self,
        destination: str,
        path: str,
        interface: str,
        member: str,
        signature: str = "",
        body: Sequence[Any] = (),
        timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> Reply:
        """Call a method; return its body and unix fds, raise `CallFailed` on a D-Bus error."""
        if not self.connected:
            raise BusClosed(f"{interface}.{member}: not connected to {self.address}")
        msg = Message(
            destination=destination,
            path=path,
            interface=interface,
            member=member,
            signature=signature,
            body=list(body),
        )
        pending = asyncio.ensure_future(self._bus.call(msg))
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # races with the reply, and a guard that cannot be stopped is worse than none
            async with asyncio.timeout(timeout):
                reply: Message | None = await asyncio.shield(pending)
        except TimeoutError:
            # the reply may still come, with fds: close them when it does
            pending.add_done_callback(_close_late_reply)
            raise CallFailed(
                f"{interface}.{member}", "org.freedesktop.DBus.Error.Timeout", f"{timeout}s"
            ) from None
        except asyncio.CancelledError:
            pending.add_done_callback(_close_late_reply)
            raise
        except Exception as e:
            raise BusClosed(
                f"{interface}.{member}: connection to {self.address} lost: {e!r}"
            ) from e
        if reply is None:
            raise BusClosed(f"{interface}.{member}: connection to {self.address} closed")
        if reply.message_type == MessageType.ERROR:
            _close_message_fds(reply)
            text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            raise CallFailed(f"{interface}.{member}", str(reply.error_name), text)
        return Reply(list(reply.body), list(reply.unix_fds or []))

    async def call_dbus(self, member: str, signature: str = "", body: Sequence[Any] = ()) -> Reply:
        """Call a method of the bus daemon itself (org.freedesktop.DBus)."""
        return await self.call(DBUS_NAME, DBUS_PATH, DBUS_INTERFACE, member, signature, body)

    async def get_property(
        self, destination: str, path: str, interface: str, name: str, timeout: float = 10.0
    ) -> Any:
        """`org.freedesktop.DBus.Properties.Get`, unwrapped from its variant."""
        reply = await self.call(
            destination,
            path,
            PROPERTIES_INTERFACE,
            "Get",
            "ss",
            [interface, name],
            timeout=timeout,
        )
        reply.close_fds()
        value = reply.body[0] if reply.body else None
        if not isinstance(value, Variant):
            raise BusError(f"{interface}.{name}: Properties.Get returned {value!r}")
        return value.value

    async def introspect(self, destination: str, path: str) -> intr.Node:
        reply = await self.call(destination, path, INTROSPECTABLE_INTERFACE, "Introspect")
        reply.close_fds()
        try:
            return intr.Node.parse(reply.body[0])
        except Exception as e:
            raise BusError(f"introspection data of {destination} {path} is invalid: {e}") from e

    async def name_owner(self, name: str) -> str | None:
        """The unique name owning `name`, or None when nobody owns it."""
        try:
            reply = await self.call_dbus("GetNameOwner", "s", [name])
        except CallFailed as e:
            if e.name == "org.freedesktop.DBus.Error.NameHasNoOwner":
                return None
            raise
        return str(reply.body[0])

    # -- signals

    async def add_match(self, rule: str) -> None:
        """Install a match rule on the daemon; once this returns, matching signals are routed."""
        await self.call_dbus("AddMatch", "s", [rule])

    def add_signal_handler(self, handler: SignalHandler) -> None:
        """Call `handler` (synchronously, in message order) for every signal received."""
        self._signal_handlers.append(handler)

    def remove_signal_handler(self, handler: SignalHandler) -> None:
        with contextlib.suppress(ValueError):
            self._signal_handlers.remove(handler)

    def _on_message(self, msg: Message) -> None:
        if msg.message_type != MessageType.SIGNAL:
            return None
        for handler in list(self._signal_handlers):
            try:
                handler(msg)
            except Exception:
                log.exception("handler for D-Bus signal %s.%s failed", msg.interface, msg.member)
        # signals we do not consume must not leak the fds they might carry
        _close_message_fds(msg)
        return None


def _close_late_reply(fut: asyncio.Future[Message | None]) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    msg = fut.result()
    if msg is not None and msg.unix_fds:
        log.warning(
            "closing %d unix fd(s) of a D-Bus reply that came after its call was abandoned",
            len(msg.unix_fds),
        )
        _close_message_fds(msg)


def _abandon(raw: MessageBus) -> None:
    """Tear down a connection that never finished connecting."""
    fd = getattr(raw, "_fd", None)
    if isinstance(fd, int):
        loop = asyncio.get_running_loop()
        loop.remove_reader(fd)
        loop.remove_writer(fd)
    _close_socket(raw)


def _close_socket(raw: MessageBus) -> None:
    # dbus-next 0.2 shuts the socket down but never closes it; do that once it is finalized
    for attr in ("_stream", "_sock"):
        obj = getattr(raw, attr, None)
        if obj is not None:
            try:
                obj.close()
            except OSError as e:
                log.debug("closing the D-Bus socket failed: %s", e)
