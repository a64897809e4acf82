"""Which boot this is: what tells a shutdown maintenance of an earlier boot from this boot's."""

from __future__ import annotations

import errno
from pathlib import Path

from nodeagent.model.shutdown import KERNEL_BOOT_ID, boot_id

PROC = Path("/proc")
_INITS = ("systemd", "init")


def read_boot_id(proc: Path = PROC) -> str:
    """The kernel's boot id as the kernel writes it (what the kubelet reports as the Node's
    status.nodeInfo.bootID), plus the start time of PID 1 when PID 1 is the system's init.

    The kernel id alone changes at every kernel boot. Userspace can also start over without a
    new kernel: `systemctl soft-reboot`, or a container with its own systemd (as the
    end-to-end tests boot). Then PID 1 starts again, at a new time since the kernel booted. In
    a pod without the host's PID namespace, PID 1 is not an init and only the kernel id is used.
    """
    path = proc / "sys/kernel/random/boot_id"
    kernel = path.read_text(encoding="ascii").strip()
    if not KERNEL_BOOT_ID.fullmatch(kernel):
        raise OSError(errno.EINVAL, f"not a boot id: {kernel!r}", str(path))
    try:
        if (proc / "1/comm").read_text().strip() not in _INITS:
            return boot_id(kernel)
        # field 22 of /proc/1/stat (starttime, in clock ticks since boot); the command name
        # in field 2 may hold spaces, so count from its closing parenthesis
        fields = (proc / "1/stat").read_text().rsplit(")", 1)[1].split()
        return boot_id(kernel, f"{int(fields[19]):x}")
    except (OSError, IndexError, ValueError):
        return boot_id(kernel)
