"""The real node's images (nodeagent_testbed.realnode.images): made without a registry, imported
by name into a containerd of their own (Debian's 1.6, runc), and run there."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import psutil
import pytest

from nodeagent_testbed.realnode import images

pytestmark = pytest.mark.realnode

TOOLS = ("buildah", "debootstrap", "unshare", "containerd", "ctr", "runc", "dpkg-query")
RUN_CONTAINERD = Path("/run/containerd")  # containerd 1.6's shims put their sockets in its s/


def require() -> None:
    if os.environ.get("NODEAGENT_TEST_NODE") != "real":
        pytest.skip("real-node tests run with NODEAGENT_TEST_NODE=real (scripts/test --node real)")
    if os.geteuid() != 0:
        pytest.skip("building images with buildah and running containerd need root")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/setup installs them)")


def names_in(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        f = tar.extractfile("index.json")
        assert f is not None
        index = json.load(f)
    return [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]


class Containerd:
    """A containerd of its own: root, state, sockets and the containers' cgroup parent all
    under names no other containerd uses; `stop` leaves no process, mount or cgroup."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        self.address = dir / "containerd.sock"
        self.cgroup = f"nodeagent-images-{os.getpid()}-{time.monotonic_ns()}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.drain: threading.Thread | None = None
        self.log = dir / "containerd.log"

    def start(self, timeout: float = 60) -> None:
        config = self.dir / "config.toml"
        config.write_text(
            f"""version = 2
root = "{self.dir}/root"
state = "{self.dir}/state"
# images and ctr's tasks only: no CRI, so nothing of Kubernetes' (CNI, /var/lib) is touched
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{self.address}"
[ttrpc]
  address = "{self.address}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{self.dir}/opt"
"""
        )
        self.proc = subprocess.Popen(
            ["containerd", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stderr is not None
        log = self.log.open("wb")
        booted = threading.Event()

        def copy(stream: IO[bytes]) -> None:  # its log to a file, telling when it has booted
            with log:
                for line in stream:
                    log.write(line)
                    log.flush()
                    if b"containerd successfully booted" in line:
                        booted.set()
            booted.set()  # it exited: start() looks at the process

        self.drain = threading.Thread(target=copy, args=(self.proc.stderr,), daemon=True)
        self.drain.start()
        if not booted.wait(timeout) or self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            self.stop()
            raise AssertionError(f"containerd did not boot within {timeout:.0f} s:\n{tail}")

    def ctr(self, *args: str, timeout: float = 120) -> str:
        cmd = ["ctr", "--address", str(self.address), "-n", "k8s.io", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr}"
        return done.stdout

    def run_args(self, id: str) -> list[str]:
        """`ctr run` options keeping the runc state, IO fifos and cgroup ours."""
        return [
            f"--runc-root={self.dir}/runc",
            f"--fifo-dir={self.dir}/fifo",
            f"--cgroup=/{self.cgroup}/{id}",
        ]

    def stop(self, timeout: float = 60) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.remove_containers(timeout)  # their shims would outlive containerd
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self.drain is not None:
            self.drain.join(timeout)
        for controller in Path("/sys/fs/cgroup").iterdir():
            with contextlib.suppress(FileNotFoundError):
                (controller / self.cgroup).rmdir()

    def remove_containers(self, timeout: float) -> None:
        """Kill and remove what a failed test left running; what cannot be removed shows in
        `leftovers`."""
        base = ["ctr", "--address", str(self.address), "-n", "k8s.io"]

        def ctr(*args: str) -> list[str]:
            done = subprocess.run(
                [*base, *args], capture_output=True, text=True, timeout=timeout, check=False
            )
            return done.stdout.split()

        for task in ctr("task", "ls", "--quiet"):
            ctr("task", "kill", "--signal", "SIGKILL", task)
            ctr("task", "attach", task)  # returns once it has exited, and deletes the task
        for container in ctr("container", "ls", "--quiet"):
            ctr("container", "rm", container)

    def leftovers(self) -> list[str]:
        left = [
            f"process {p.pid}: {' '.join(p.info['cmdline'] or [])}"
            for p in psutil.process_iter(["cmdline"])
            if str(self.dir) in " ".join(p.info["cmdline"] or [])
        ]
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        left += [f"mount: {m}" for m in mounts if str(self.dir) in m]
        left += [
            f"cgroup: {c / self.cgroup}"
            for c in Path("/sys/fs/cgroup").iterdir()
            if (c / self.cgroup).exists()
        ]
        return left


@contextlib.contextmanager
def containerd(dir: Path) -> Iterator[Containerd]:
    dir.mkdir(parents=True, exist_ok=True)
    had_run_dir = RUN_CONTAINERD.exists()
    c = Containerd(dir)
    c.start()
    try:
        yield c
    finally:
        c.stop()
        if not had_run_dir:  # ours, and empty once the shims are gone
            for d in [*sorted(RUN_CONTAINERD.rglob("*"), reverse=True), RUN_CONTAINERD]:
                with contextlib.suppress(OSError):  # not empty: someone else's
                    d.rmdir()
        left = c.leftovers()
        assert not left, f"the throwaway containerd left behind: {left}"


@pytest.mark.timeout(1800)  # the first build debootstraps the base and builds the agent's image
def test_images_import_by_name_and_run(tmp_path: Path) -> None:
    require()
    archives = images.ensure_images(log=False)
    pause, busybox, etcd, nodeagent = archives
    assert names_in(pause) == [images.PAUSE]
    assert names_in(busybox) == [images.BUSYBOX]
    assert names_in(etcd) == [images.ETCD]
    # the DaemonSet's own image name too, so packaging/kubernetes runs unchanged on the node
    assert names_in(nodeagent) == [images.NODEAGENT, images.release_image()]
    # made once: asking again builds nothing and gives the same files
    assert images.ensure_images(log=False) == archives

    with containerd(tmp_path / "ctrd") as c:
        images.import_into(archives, c.address)  # plain `ctr images import`: names from index.json
        listed = c.ctr("images", "ls", "--quiet").split()
        wanted = [images.PAUSE, images.BUSYBOX, images.ETCD, images.NODEAGENT]
        wanted.append(images.release_image())
        assert set(wanted) <= set(listed), listed

        out = c.ctr("run", "--rm", *c.run_args("bb"), images.BUSYBOX, "bb", "sh", "-c", "echo ok")
        assert out.strip() == "ok"

        out = c.ctr(
            "run", "--rm", *c.run_args("et"), images.ETCD, "et", "/usr/local/bin/etcd", "--version"
        )
        assert out.startswith("etcd Version:"), out

        out = c.ctr("run", "--rm", *c.run_args("na"), images.NODEAGENT, "na", "nodeagent", "--help")
        assert out.startswith("usage: nodeagent"), out
        # the virtualenv's python links to the base's /usr/local/bin one (the Dockerfile's word)
        show_link = "import os; print(os.readlink('/opt/nodeagent/bin/python'))"
        out = c.ctr(
            "run", "--rm", *c.run_args("py"), images.NODEAGENT, "py", "python", "-c", show_link
        )
        assert out.strip().startswith("/usr/local/bin/python"), out

        # the sandbox image: pause runs until SIGTERM, then exits 0
        c.ctr("run", "--detach", *c.run_args("pz"), images.PAUSE, "pz")
        assert "RUNNING" in c.ctr("task", "ls")
        c.ctr("task", "kill", "--signal", signal.SIGTERM.name, "pz")
        c.ctr("task", "attach", "pz", timeout=30)  # waits for the exit; fails unless status 0
        c.ctr("container", "rm", "pz")
