"""systemd's notify protocol (READY=1, STATUS=, WATCHDOG=1) over $NOTIFY_SOCKET."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


class Notifier:
    """Sends notifications when run by systemd with Type=notify; does nothing otherwise."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.address = env.get("NOTIFY_SOCKET") or None
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        ours = pid is None or pid == str(os.getpid())
        # ping at half the watchdog interval, as sd_watchdog_enabled(3) advises
        self.watchdog_interval = int(usec) / 2e6 if usec and usec.isdigit() and ours else None

    def notify(self, **fields: str) -> None:
        if self.address is None:
            return
        message = "\n".join(f"{k.upper()}={v}" for k, v in fields.items()).encode()
        address = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendto(message, address)
        except OSError as e:
            log.warning("sd_notify to %s failed: %s", self.address, e)

    def ready(self, status: str) -> None:
        self.notify(ready="1", status=status)

    def status(self, status: str) -> None:
        self.notify(status=status)

    def watchdog(self) -> None:
        self.notify(watchdog="1")

    def stopping(self) -> None:
        self.notify(stopping="1")
