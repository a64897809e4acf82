"""A Debian container with real systemd, D-Bus and logind, booted with systemd-nspawn.

The base root file system is made once with debootstrap and cached outside the repository
(`NODEAGENT_E2E_CACHE`, default /var/cache/nodeagent-e2e); each test boots its own copy. The
container shares the host's network, so an agent inside reaches a simulated API server on the
host's 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

CACHE = Path(os.environ.get("NODEAGENT_E2E_CACHE", "/var/cache/nodeagent-e2e"))
SUITE = "bookworm"
APT_SOURCES = Path("/etc/apt")
PACKAGES = [
    "systemd",
    "systemd-sysv",
    "dbus",
    "libpam-systemd",
    "python3",
    "python3-venv",
    "iproute2",
    "ca-certificates",
    "procps",
]
REBOOT_EXIT = 133  # systemd-nspawn's exit status when the container asked to reboot


def host_mirror(apt: Path = APT_SOURCES, suite: str = SUITE) -> str:
    """The Debian archive the host's apt uses for `suite` (NODEAGENT_E2E_MIRROR overrides):
    the machine knows which mirror it may reach; the repository names none."""
    if os.environ.get("NODEAGENT_E2E_MIRROR"):
        return os.environ["NODEAGENT_E2E_MIRROR"]
    one_line = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]
    for f in one_line:
        for line in f.read_text().splitlines() if f.is_file() else []:
            words = [w for w in line.split("#", 1)[0].split() if not w.startswith("[")]
            if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                return words[1]
    for f in sorted((apt / "sources.list.d").glob("*.sources")):
        for stanza in f.read_text().split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith(("#", " ")):
                    key, value = line.split(":", 1)
                    fields[key.strip().lower()] = value.strip()
            if (
                "deb" in fields.get("types", "").split()
                and suite in fields.get("suites", "").split()
            ):
                return fields.get("uris", "").split()[0]
    raise RuntimeError(
        f"no apt source for Debian {suite} in {apt}; set NODEAGENT_E2E_MIRROR to a mirror URL"
    )


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


# A real node's root file system: containerd, runc and the CNI plugins beside systemd (the
# kubelet, built from the control plane's module, is copied in per node; realnode).
NODE_PACKAGES = ["containerd", "runc", "containernetworking-plugins", "iptables", "mount"]


def base_rootfs(extra: tuple[str, ...] = (), flavour: str = "rootfs") -> Path:
    """The cached Debian root file system (PACKAGES plus `extra`), made with debootstrap on
    first use; `flavour` names it in the cache."""
    root = CACHE / f"{SUITE}-{flavour}"
    marker = root / ".nodeagent-complete"
    with locked(CACHE / ".lock"):
        if marker.exists():
            return root
        tmp = CACHE / f"{SUITE}-{flavour}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join([*PACKAGES, *extra])}",
                SUITE,
                str(tmp),
                host_mirror(),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (tmp / ".nodeagent-complete").touch()
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
        return root


def node_rootfs() -> Path:
    return base_rootfs(tuple(NODE_PACKAGES), "node-rootfs")


@dataclass
class Container:
    rootfs: Path
    name: str
    proc: asyncio.subprocess.Process | None = None
    pid: int | None = None  # the container's init, as the host sees it
    nspawn_args: tuple[str, ...] = ()  # more of systemd-nspawn's options at boot
    # boot in a child cgroup of this name in every hierarchy (see own_cgroups); None: ours
    cgroup: str | None = None

    @classmethod
    def copy_of_base(cls, where: Path, name: str, base: Path | None = None) -> Container:
        """A copy of `base` (the plain cached root fs by default) in `where`."""
        rootfs = where / "rootfs"
        source = base or base_rootfs()
        subprocess.run(["cp", "-a", "--reflink=auto", str(source), str(rootfs)], check=True)
        return cls(rootfs, name)

    def path(self, inside: str) -> Path:
        return self.rootfs / inside.lstrip("/")

    def run_offline(self, *cmd: str, binds: tuple[str, ...] = ()) -> None:
        """Run a command in the (not booted) container's file system."""
        args = [
            "systemd-nspawn",
            "--register=no",
            "--keep-unit",
            "--quiet",
            "--pipe",
            "-D",
            str(self.rootfs),
        ]
        args += [f"--bind-ro={b}" for b in binds]
        subprocess.run([*args, *cmd], check=True)

    async def boot(self, timeout: float = 120) -> None:
        dirs = own_cgroups(self.cgroup) if self.cgroup else []
        self.proc = await asyncio.create_subprocess_exec(
            "systemd-nspawn",
            "--register=no",
            "--keep-unit",
            "-b",
            "-D",
            str(self.rootfs),
            f"--machine={self.name}",
            *self.nspawn_args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            preexec_fn=(lambda: join_cgroups(dirs)) if dirs else None,
        )
        async with asyncio.timeout(timeout):
            self.pid = await self._init_pid()
            # --wait returns once boot finished: every unit, our Type=notify agent included,
            # is up; before systemd listens on its socket, systemctl cannot connect yet
            while True:
                state = (
                    await self.exec("systemctl", "is-system-running", "--wait", check=False)
                ).strip()
                if state in ("running", "degraded"):
                    return
                await asyncio.sleep(0.2)  # systemd not listening yet: ask again

    async def _init_pid(self) -> int:
        """The container's systemd (PID 1 in its own namespace), once it is there."""
        assert self.proc is not None
        nspawn = psutil.Process(self.proc.pid)
        while True:
            for child in nspawn.children():
                if is_init(child):
                    pid: int = child.pid
                    return pid
            if self.proc.returncode is not None:
                raise AssertionError(f"systemd-nspawn exited ({self.proc.returncode})")
            # nspawn sets up the namespaces and execs systemd within a second; nothing to
            # wait on but the process table
            await asyncio.sleep(0.05)

    async def exec(self, *cmd: str, check: bool = True, timeout: float = 60) -> str:
        assert self.pid is not None, "container not booted"
        proc = await asyncio.create_subprocess_exec(
            "nsenter",
            "-t",
            str(self.pid),
            "-a",
            *cmd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode()}")
        return out.decode()

    async def inhibit_delay_max_usec(self) -> int:
        """logind's InhibitDelayMaxUSec as it is now (what a delay lock may hold a shutdown)."""
        out = await self.exec(
            "busctl",
            "get-property",
            "org.freedesktop.login1",
            "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager",
            "InhibitDelayMaxUSec",
        )
        return int(out.split()[1])

    async def inhibitors(self) -> list[tuple[str, str, str, str, int, int]]:
        """logind's inhibitor locks now: (what, who, why, mode, uid, pid) each."""
        out = await self.exec(
            "busctl",
            "--json=short",
            "call",
            "org.freedesktop.login1",
            "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager",
            "ListInhibitors",
        )
        (locks,) = json.loads(out)["data"]
        return [(a, b, c, d, int(e), int(f)) for a, b, c, d, e, f in locks]

    async def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        async with asyncio.timeout(timeout):
            rc = await self.proc.wait()
        self.proc = self.pid = None
        return rc

    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def stop(self) -> None:
        if not self.running():
            return
        assert self.proc is not None
        with contextlib.suppress(AssertionError, TimeoutError):
            await self.exec("systemctl", "poweroff", "--force", "--force", check=False, timeout=10)
        try:
            async with asyncio.timeout(30):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.proc = self.pid = None


def is_init(p: psutil.Process) -> bool:
    """systemd running as PID 1 of its own PID namespace (a /proc read, never blocks)."""
    try:
        status = Path(f"/proc/{p.pid}/status").read_text()
        nspid = next(line for line in status.splitlines() if line.startswith("NSpid:")).split()
        return len(nspid) > 2 and nspid[-1] == "1" and "systemd" in p.exe()
    except (psutil.Error, OSError, StopIteration):
        return False


# --- a cgroup subtree of a container's own ---------------------------------------------------
# Two containers booted from one cgroup with --keep-unit share it: both systemds then manage one
# tree, and two kubelets' kubepods collide. Booted from a child cgroup of its own in every
# hierarchy, each container's systemd sees only its subtree (shared/notes/multi-node.md).


MOUNT_OPTIONS = frozenset({"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec"})


def _hierarchies() -> list[tuple[Path, str]]:
    """Each cgroup hierarchy's mount point and our cgroup's path in it (/proc/self/mountinfo
    and /proc/self/cgroup)."""
    ours: dict[str, str] = {}  # a hierarchy's controllers ("" for cgroup2) -> our path
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        ours[controllers] = path
    found: list[tuple[Path, str]] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        fstype, _, options = tail.split()[:3]
        root, mountpoint = fields.split()[3:5]
        if fstype == "cgroup2":
            key = ""
        elif fstype == "cgroup":
            # its controllers and name= among the super options (rw, relatime, ...)
            key = ",".join(
                o
                for o in options.split(",")
                if o.startswith("name=") or (o not in MOUNT_OPTIONS and "=" not in o)
            )
        else:
            continue
        match = next((k for k in ours if set(k.split(",")) == set(key.split(","))), None)
        if match is None or not ours[match].startswith(root):
            continue
        found.append((Path(mountpoint), ours[match][len(root.rstrip("/")) :].lstrip("/")))
    return found


def cgroup_dirs(name: str) -> list[Path]:
    """The child cgroup `name` of ours, in every hierarchy."""
    return [mount / path / name for mount, path in _hierarchies()]


def own_cgroups(name: str) -> list[Path]:
    """Make the child cgroup `name` of ours in every hierarchy (a new cpuset group starts with
    no CPUs and no memory nodes: its parent's are copied in) and return their directories."""
    dirs = cgroup_dirs(name)
    for d in dirs:
        d.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (d / knob).exists() and not (d / knob).read_text().strip():
                (d / knob).write_text((d.parent / knob).read_text())
    return dirs


def join_cgroups(dirs: list[Path]) -> None:
    """Move this process into `dirs` (run in the child between fork and exec)."""
    for d in dirs:
        (d / "cgroup.procs").write_text(str(os.getpid()))


def remove_cgroups(name: str) -> list[str]:
    """Remove the child cgroup `name` and what is under it (empty once the container's
    processes are gone); returns what could not be removed."""
    left: list[str] = []
    for top in cgroup_dirs(name):
        if top.is_dir():
            left += remove_cgroup_tree(top)
    return left


def remove_cgroup_tree(top: Path) -> list[str]:
    """Remove the cgroup `top` and its descendants, deepest first (a cgroup goes only once its
    children are gone); returns what could not be removed."""
    left: list[str] = []
    for d in sorted(
        (p for p in [top, *top.rglob("*")] if p.is_dir()),
        key=lambda p: len(p.parts),
        reverse=True,
    ):
        try:
            d.rmdir()
        except OSError as e:
            left.append(f"{d}: {e.strerror}")
    return left
