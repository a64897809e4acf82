"""Keep the inhibitor fd in systemd's file descriptor store, so the lock outlives the agent.

logind holds a delay lock for as long as any copy of its fd is open. A copy handed to the
service manager (`sd_notify` with `FDSTORE=1`, the fd attached as SCM_RIGHTS) stays open while
the agent crashes and restarts; the restarted agent gets it back through `LISTEN_FDS` /
`LISTEN_FDNAMES` (sd_listen_fds(3)) and carries on with the shutdown it was draining for. The unit
needs `FileDescriptorStoreMax=`. Releasing the lock means closing our fd *and* removing the
stored copy (`FDSTOREREMOVE=1`), or the store would keep the shutdown waiting.

Each stored lock has a name of its own (`logind-inhibitor-N`), so a new lock can be stored
before the old one is removed (make-before-break, as the guard takes locks).
"""

from __future__ import annotations

import array
import itertools
import logging
import os
import socket
from collections.abc import Mapping, MutableMapping

__all__ = ["NAME_PREFIX", "FdStore", "inherited_fds"]

log = logging.getLogger(__name__)

NAME_PREFIX = "logind-inhibitor"
SD_LISTEN_FDS_START = 3


def inherited_fds(
    env: MutableMapping[str, str], prefix: str = NAME_PREFIX
) -> list[tuple[int, str]]:
    """(fd, name) of the fds systemd passed back from the store whose name starts with `prefix`,
    oldest first, made
    close-on-exec. The `LISTEN_*` variables are removed from `env` (as sd_listen_fds(3) with
    unset_environment does), so no child process mistakes them for its own."""
    pid = env.pop("LISTEN_PID", None)
    count = env.pop("LISTEN_FDS", None)
    names = env.pop("LISTEN_FDNAMES", "")
    if pid is None or count is None or pid != str(os.getpid()):
        return []
    try:
        n = int(count)
    except ValueError:
        log.warning("ignoring LISTEN_FDS=%r: not a number", count)
        return []
    labels = names.split(":") if names else []
    out = []
    for i in range(n):
        fd = SD_LISTEN_FDS_START + i
        label = labels[i] if i < len(labels) else ""
        try:
            os.set_inheritable(fd, False)
        except OSError as e:
            log.warning("passed fd %d (%s) is not usable: %s", fd, label or "unnamed", e)
            continue
        if label.startswith(prefix):
            out.append((fd, label))
        else:
            log.warning("closing fd %d (%r): not one nodeagent stores", fd, label)
            os.close(fd)
    return out


class FdStore:
    """The service manager's fd store, when run by systemd with a notify socket; otherwise
    every call is a no-op that returns False."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.address = env.get("NOTIFY_SOCKET") or None
        self._names = itertools.count(1)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def new_name(self) -> str:
        return f"{NAME_PREFIX}-{os.getpid()}-{next(self._names)}"

    def store(self, fd: int, name: str) -> bool:
        return self._send(f"FDSTORE=1\nFDNAME={name}", fd)

    def remove(self, name: str) -> bool:
        return self._send(f"FDSTOREREMOVE=1\nFDNAME={name}", None)

    def _send(self, message: str, fd: int | None) -> bool:
        if self.address is None:
            return False
        address = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        ancillary = []
        if fd is not None:
            ancillary.append((socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd])))
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendmsg([message.encode()], ancillary, 0, address)
        except OSError as e:
            log.error("sd_notify %s to %s failed: %s", message.split("\n", 1)[0], self.address, e)
            return False
        return True
