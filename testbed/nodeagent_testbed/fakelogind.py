"""A simulated systemd-logind (and the bit of systemd's manager we call) on a private dbus-daemon.

Used by the tests and by `nodeagent demo`, which has no real logind to shut down.

Written with dbus-next's `ServiceInterface`, so the code under test speaks real D-Bus through a
real `dbus-daemon`, fd passing included. Behaviour copied from logind where it matters:

- `Inhibit()` hands out the write end of a pipe and watches the read end; the lock is gone when
  every copy of the write end is closed (EOF on the read end). The fake closes its own copy
  once the reply has been written, or it would never see the client let go.
- delay locks are refused with `org.freedesktop.login1.OperationInProgress` while a shutdown is
  being prepared, as logind does.
- `PrepareForShutdownWithMetadata` is sent before `PrepareForShutdown` (documented logind API);
  `with_metadata=False` gives an older logind with neither the signal nor the property.
- `systemd1.Manager.KillUnit("systemd-logind.service", ..., SIGHUP)` makes the fake re-read
  `InhibitDelayMaxSec` from the drop-in directories under `conf_root`, with systemd's
  precedence rules.
- Inhibitors survive a restart of the fake (logind serializes them) and of the dbus-daemon.
- `Reboot(interactive)` does what logind does: it sends `PrepareForShutdown(true)` (type
  reboot), answers, and waits for the delay inhibitors of `shutdown` to go (at most
  `InhibitDelayMaxUSec`); then the machine "reboots" (`rebooted` is set). While a shutdown is
  being prepared it refuses with `OperationInProgress`, as logind refuses a second action.
"""

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbus_next.aio.message_bus import MessageBus
from dbus_next.constants import MessageType, PropertyAccess, RequestNameReply
from dbus_next.errors import DBusError
from dbus_next.message import Message
from dbus_next.service import ServiceInterface, dbus_property, method
from dbus_next.service import signal as dbus_signal
from dbus_next.signature import Variant

LOGIND_NAME = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
LOGIND_MANAGER = "org.freedesktop.login1.Manager"
SYSTEMD_NAME = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
SYSTEMD_MANAGER = "org.freedesktop.systemd1.Manager"
DEFAULT_DELAY_USEC = 5_000_000

# D-Bus signatures for dbus-next's annotation-driven interfaces (this module deliberately does
# not use `from __future__ import annotations`: dbus-next reads these values as annotations)
STR = "s"
FD = "h"
BOOL = "b"
UINT64 = "t"
INT32 = "i"
INHIBITORS = "a(ssssuu)"
VARDICT = "a{sv}"
BOOL_VARDICT = "ba{sv}"

_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>{address}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def dbus_daemon_path() -> str | None:
    return shutil.which("dbus-daemon")


class DBusDaemon:
    """A private `dbus-daemon` on a unix socket; `restart()` keeps the address."""

    def __init__(self) -> None:
        # short directory: unix socket paths are limited to 108 bytes
        self.dir = Path(tempfile.mkdtemp(prefix="na-dbus-", dir="/tmp"))
        self.socket = self.dir / "bus"
        self.address = f"unix:path={self.socket}"
        self.config = self.dir / "bus.conf"
        self.config.write_text(_CONFIG.format(address=self.address))
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self) -> None:
        exe = dbus_daemon_path()
        assert exe is not None, "dbus-daemon is not installed"
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        self.proc = await asyncio.create_subprocess_exec(
            exe,
            f"--config-file={self.config}",
            "--nofork",
            "--nopidfile",
            "--print-address=1",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        async with asyncio.timeout(10):
            line = await self.proc.stdout.readline()
        if not line:
            err = b""
            if self.proc.stderr is not None:
                err = await self.proc.stderr.read()
            raise RuntimeError(f"dbus-daemon did not start: {err.decode(errors='replace')}")
        self.starts += 1

    async def kill(self) -> None:
        """SIGKILL: every client sees its connection drop, nothing is cleaned up."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()

    async def restart(self) -> None:
        await self.kill()
        await self.start()

    async def close(self) -> None:
        await self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class FakeInhibitor:
    id: int
    what: str
    who: str
    why: str
    mode: str
    read_fd: int
    pid: int = 0  # the caller's, as the bus tells
    released: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def active(self) -> bool:
        return not self.released.is_set()


def _parse_usec(value: str) -> int | None:
    value = value.strip()
    number, scale = value, 1_000_000
    for suffix, factor in (("us", 1), ("ms", 1_000), ("min", 60_000_000), ("s", 1_000_000)):
        if value.endswith(suffix):
            number, scale = value[: -len(suffix)].strip(), factor
            break
    try:
        return round(float(number) * scale)
    except ValueError:
        return None


class _Manager(ServiceInterface):
    """org.freedesktop.login1.Manager as logind before v255 (no shutdown metadata)."""

    def __init__(self, fake: "FakeLogind") -> None:
        super().__init__(LOGIND_MANAGER)
        self.fake = fake

    @method()
    def Inhibit(self, what: STR, who: STR, why: STR, mode: STR) -> FD:
        # answered by FakeLogind._on_message, which must see the reply go out; kept here so
        # introspection lists it
        raise DBusError("org.freedesktop.DBus.Error.Failed", "not reached")

    @method()
    def Reboot(self, interactive: BOOL) -> None:
        self.fake.reboot(interactive)

    @method()
    def ListInhibitors(self) -> INHIBITORS:
        return [[i.what, i.who, i.why, i.mode, 0, i.pid] for i in self.fake.inhibitors if i.active]

    @dbus_signal()
    def PrepareForShutdown(self, active: bool) -> BOOL:
        return active

    @dbus_property(access=PropertyAccess.READ)
    def PreparingForShutdown(self) -> BOOL:
        return self.fake.preparing

    @dbus_property(access=PropertyAccess.READ)
    def InhibitDelayMaxUSec(self) -> UINT64:
        return self.fake.delay_max_usec


class _ManagerWithMetadata(_Manager):
    """org.freedesktop.login1.Manager as logind v256+."""

    @dbus_signal()
    def PrepareForShutdownWithMetadata(
        self, active: bool, metadata: dict[str, Any]
    ) -> BOOL_VARDICT:
        return [active, metadata]

    @dbus_property(access=PropertyAccess.READ)
    def PreparingForShutdownWithMetadata(self) -> VARDICT:
        if not self.fake.preparing:
            return {"preparing": Variant("b", False)}
        return {"preparing": Variant("b", True), "type": Variant("s", self.fake.kind)}


class _SystemdManager(ServiceInterface):
    def __init__(self, fake: "FakeLogind") -> None:
        super().__init__(SYSTEMD_MANAGER)
        self.fake = fake

    @method()
    def KillUnit(self, name: STR, whom: STR, signal_number: INT32) -> None:
        self.fake.kill_unit_calls.append((name, whom, signal_number))
        if name == "systemd-logind.service" and signal_number == signal.SIGHUP:
            self.fake.schedule_reload()
        self.fake.kill_unit_called.set()


class FakeLogind:
    """`org.freedesktop.login1` (+ `org.freedesktop.systemd1`'s KillUnit) on a `DBusDaemon`."""

    def __init__(
        self,
        daemon: DBusDaemon,
        *,
        conf_root: Path | None = None,
        with_metadata: bool = True,
        reload_delay: float = 0.0,
    ) -> None:
        self.daemon = daemon
        self.conf_root = conf_root
        self.with_metadata = with_metadata
        self.reload_delay = reload_delay
        self.preparing = False
        self.kind = "reboot"
        self.delay_max_usec = DEFAULT_DELAY_USEC
        self.reloads_honoured = True  # False: a logind that ignores SIGHUP
        self.inhibitors: list[FakeInhibitor] = []
        self.kill_unit_calls: list[tuple[str, str, int]] = []
        self.kill_unit_called = asyncio.Event()
        self.reloaded = asyncio.Event()
        self.changed = asyncio.Event()  # set whenever an inhibitor is taken or released
        self.reboot_calls: list[bool] = []  # Reboot(interactive) calls logind took
        self.reboot_called = asyncio.Event()
        self.rebooted = asyncio.Event()  # the delay is over: the machine goes down
        self.bus: MessageBus | None = None
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Future[None]] = set()
        iface_cls = _ManagerWithMetadata if with_metadata else _Manager
        self.manager = iface_cls(self)
        self.systemd = _SystemdManager(self)

    # -- life cycle

    async def start(self) -> None:
        bus = await MessageBus(bus_address=self.daemon.address, negotiate_unix_fd=True).connect()
        bus.add_message_handler(self._on_message)
        bus.export(LOGIND_PATH, self.manager)
        bus.export(SYSTEMD_PATH, self.systemd)
        for name in (SYSTEMD_NAME, LOGIND_NAME):
            reply = await bus.request_name(name)
            assert reply == RequestNameReply.PRIMARY_OWNER, (name, reply)
        self.bus = bus

    async def stop(self) -> None:
        """Leave the bus (as logind exiting); inhibitors stay as they are."""
        bus, self.bus = self.bus, None
        if bus is not None:
            if bus.connected:
                bus.disconnect()
            with contextlib.suppress(Exception):
                # also retrieves the EOFError of a bus whose daemon was killed
                async with asyncio.timeout(5):
                    await bus.wait_for_disconnect()
            for attr in ("_stream", "_sock"):
                with contextlib.suppress(Exception):
                    getattr(bus, attr).close()

    async def restart(self) -> None:
        """logind restarting: its name changes owner, its inhibitors survive."""
        await self.stop()
        await self.start()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.stop()
        loop = asyncio.get_running_loop()
        for inh in self.inhibitors:
            if inh.active:
                loop.remove_reader(inh.read_fd)
                os.close(inh.read_fd)
                inh.released.set()

    # -- what tests do

    def emit_shutdown(self, active: bool, type: str = "reboot") -> None:
        """What logind does on `systemctl reboot` (True) or when the shutdown is called off."""
        self.preparing = active
        self.kind = type
        if self.with_metadata:
            assert isinstance(self.manager, _ManagerWithMetadata)
            self.manager.PrepareForShutdownWithMetadata(active, {"type": Variant("s", type)})
        self.manager.PrepareForShutdown(active)

    def reboot(self, interactive: bool) -> None:
        """`Reboot()`: announce the shutdown, then wait for the delay locks in a task."""
        if self.preparing:
            raise DBusError(
                "org.freedesktop.login1.OperationInProgress",
                "Action reboot already in progress, refusing requested reboot operation.",
            )
        self.reboot_calls.append(interactive)
        self.reboot_called.set()
        self.emit_shutdown(True, type="reboot")
        task = asyncio.ensure_future(self._reboot_after_delay())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reboot_after_delay(self) -> None:
        def delaying() -> list[FakeInhibitor]:
            return [
                i
                for i in self.inhibitors
                if i.active and i.mode == "delay" and "shutdown" in i.what.split(":")
            ]

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.delay_max_usec / 1e6):
                while held := delaying():
                    await held[0].released.wait()
        if self.preparing:  # not cancelled meanwhile
            self.rebooted.set()

    def active(self, who: str = "nodeagent") -> list[FakeInhibitor]:
        return [i for i in self.inhibitors if i.active and i.who == who]

    async def lock_taken(self, after: int = 0, timeout: float = 5.0) -> FakeInhibitor:
        """The first active inhibitor with an id above `after`, once there is one."""
        async with asyncio.timeout(timeout):
            while not (taken := [i for i in self.active() if i.id > after]):
                self.changed.clear()
                await self.changed.wait()
        return taken[0]

    async def lock_released(
        self, timeout: float = 1.0, inhibitor: "FakeInhibitor | None" = None
    ) -> None:
        """Wait until `inhibitor` (default: every nodeagent inhibitor) is released."""
        async with asyncio.timeout(timeout):
            if inhibitor is not None:
                await inhibitor.released.wait()
            else:
                while held := self.active():
                    await held[0].released.wait()

    # -- config reload

    def schedule_reload(self) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(self.reload_delay, self.reload)

    def reload(self) -> None:
        """Re-read InhibitDelayMaxSec from the drop-ins under `conf_root`, as logind on SIGHUP."""
        if not self.reloads_honoured:
            return
        value = DEFAULT_DELAY_USEC
        if self.conf_root is not None:
            dirs = [
                self.conf_root / "etc/systemd/logind.conf.d",
                self.conf_root / "run/systemd/logind.conf.d",
                self.conf_root / "usr/local/lib/systemd/logind.conf.d",
                self.conf_root / "usr/lib/systemd/logind.conf.d",
            ]
            chosen: dict[str, Path] = {}
            for d in dirs:
                if d.is_dir():
                    for p in sorted(d.glob("*.conf")):
                        chosen.setdefault(p.name, p)
            for name in sorted(chosen):
                section = ""
                for raw in chosen[name].read_text().splitlines():
                    line = raw.strip()
                    if line.startswith("[") and line.endswith("]"):
                        section = line[1:-1]
                    elif section == "Login" and line.startswith("InhibitDelayMaxSec="):
                        parsed = _parse_usec(line.partition("=")[2])
                        if parsed is not None:
                            value = parsed
        self.delay_max_usec = value
        self.reloaded.set()

    # -- Inhibit, answered by hand so the fake can close its copy of the fd after sending

    def _on_message(self, msg: Message) -> Message | bool | None:
        if not (
            msg.message_type == MessageType.METHOD_CALL
            and msg.path == LOGIND_PATH
            and msg.interface == LOGIND_MANAGER
            and msg.member == "Inhibit"
        ):
            return None
        what, who, why, mode = msg.body
        if self.preparing and "shutdown" in what.split(":") and mode == "delay":
            return Message.new_error(
                msg,
                "org.freedesktop.login1.OperationInProgress",
                "The operation inhibition has been requested for is already running",
            )
        task = asyncio.ensure_future(self._answer_inhibit(msg, what, who, why, mode))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _answer_inhibit(self, msg: Message, what: str, who: str, why: str, mode: str) -> None:
        """Answer Inhibit with the caller's pid, as logind asks the bus for it."""
        assert self.bus is not None
        pid = os.getpid()
        with contextlib.suppress(Exception):
            reply = await self.bus.call(
                Message(
                    destination="org.freedesktop.DBus",
                    path="/org/freedesktop/DBus",
                    interface="org.freedesktop.DBus",
                    member="GetConnectionUnixProcessID",
                    signature="s",
                    body=[msg.sender],
                )
            )
            if reply is not None and reply.message_type == MessageType.METHOD_RETURN:
                pid = int(reply.body[0])
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        inh = FakeInhibitor(next(self._ids), what, who, why, mode, read_fd, pid=pid)
        self.inhibitors.append(inh)
        loop = asyncio.get_running_loop()
        loop.add_reader(read_fd, self._on_readable, inh)
        sent = self.bus.send(Message.new_method_return(msg, "h", [0], unix_fds=[write_fd]))

        def close_our_copy(_: object) -> None:
            os.close(write_fd)

        sent.add_done_callback(close_our_copy)
        self.changed.set()

    def _on_readable(self, inh: FakeInhibitor) -> None:
        try:
            data = os.read(inh.read_fd, 4096)
        except BlockingIOError:
            return
        if data:
            return
        loop = asyncio.get_running_loop()
        loop.remove_reader(inh.read_fd)
        os.close(inh.read_fd)
        inh.released.set()
        self.changed.set()
