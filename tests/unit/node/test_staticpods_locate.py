"""Finding the kubelet's manifest directory: configuration, the running kubelet, the default."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from nodeagent.node.kubelet import KubeletProcess, kubelet_processes
from nodeagent.node.staticpods.locate import (
    DEFAULT_MANIFEST_DIR,
    default_stash_dir,
    find_manifest_dir,
    manifest_dir_of_kubelet,
    static_pod_paths,
)


def procs(
    *cmdlines: tuple[str, ...], cwd: Path | None = None
) -> Callable[[], list[KubeletProcess]]:
    return lambda: [KubeletProcess(100 + i, c, cwd) for i, c in enumerate(cmdlines)]


def test_configuration_wins() -> None:
    choice = find_manifest_dir(Path("/cfg"), procs(("kubelet", "--pod-manifest-path=/x")))
    assert choice.path == Path("/cfg")
    assert choice.source == "configuration"


@pytest.mark.parametrize(
    "cmdline",
    [
        ("/usr/bin/kubelet", "--pod-manifest-path=/etc/k/m"),
        ("/usr/bin/kubelet", "--pod-manifest-path", "/etc/k/m"),
        ("/usr/bin/kubelet", "--pod-manifest-path=/old", "--pod-manifest-path=/etc/k/m"),
    ],
)
def test_flag(cmdline: tuple[str, ...]) -> None:
    choice = find_manifest_dir(None, procs(cmdline))
    assert choice.path == Path("/etc/k/m")
    assert "--pod-manifest-path" in choice.source and "pid 100" in choice.source


def test_config_file_and_flag_precedence(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("kind: KubeletConfiguration\nstaticPodPath: /from/config\n")
    choice = find_manifest_dir(None, procs(("kubelet", f"--config={config}")))
    assert choice.path == Path("/from/config")
    assert str(config) in choice.source
    both = find_manifest_dir(
        None, procs(("kubelet", "--config", str(config), "--pod-manifest-path=/flag"))
    )
    assert both.path == Path("/flag")


def test_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "config.yaml").write_text("staticPodPath: manifests\n")
    # --config relative to the kubelet's working directory, staticPodPath to the config file
    choice = find_manifest_dir(None, procs(("kubelet", "--config=etc/config.yaml"), cwd=tmp_path))
    assert choice.path == tmp_path / "etc" / "manifests"


def test_drop_in_directory_overrides_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("staticPodPath: /from/config\n")
    drop_ins = tmp_path / "conf.d"
    drop_ins.mkdir()
    (drop_ins / "10-a.conf").write_text("staticPodPath: /from/a\n")
    (drop_ins / "20-b.conf").write_text("maxPods: 10\n")
    (drop_ins / "30-c.conf").write_text("staticPodPath: /from/c\n")
    (drop_ins / "40-ignored.yaml").write_text("staticPodPath: /not/a/drop-in\n")
    cmd = ("kubelet", f"--config={tmp_path / 'config.yaml'}", f"--config-dir={drop_ins}")
    assert find_manifest_dir(None, procs(cmd)).path == Path("/from/c")


def test_static_pods_turned_off(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("staticPodPath: ''\n")
    choice = find_manifest_dir(None, procs(("kubelet", f"--config={tmp_path / 'config.yaml'}")))
    assert choice.path is None


def test_default_when_the_kubelet_does_not_say(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("maxPods: 10\n")
    choice = find_manifest_dir(None, procs(("kubelet", f"--config={tmp_path / 'config.yaml'}")))
    assert choice.path == DEFAULT_MANIFEST_DIR
    assert "names no static pod path" in choice.source
    unreadable = find_manifest_dir(None, procs(("kubelet", "--config=/does/not/exist")))
    assert unreadable.path == DEFAULT_MANIFEST_DIR


def test_default_without_a_kubelet(tmp_path: Path) -> None:
    choice = find_manifest_dir(None, procs(), kubelet_config=tmp_path / "none.yaml")
    assert choice.path == DEFAULT_MANIFEST_DIR
    assert "no running kubelet" in choice.source


def test_kubeadm_config_when_no_kubelet_runs_yet(tmp_path: Path) -> None:
    """At boot, before the kubelet starts, kubeadm's kubelet config file tells."""
    config = tmp_path / "config.yaml"
    config.write_text("staticPodPath: /srv/manifests\n")
    choice = find_manifest_dir(None, procs(), kubelet_config=config)
    assert choice.path == Path("/srv/manifests")
    assert str(config) in choice.source
    # a running kubelet wins over the file
    running = find_manifest_dir(
        None, procs(("kubelet", "--pod-manifest-path=/run")), kubelet_config=config
    )
    assert running.path == Path("/run")


def test_static_pod_paths(tmp_path: Path) -> None:
    paths = static_pod_paths(Path("/m"), None, procs())
    assert paths is not None
    assert (paths.manifest_dir, paths.stash_dir) == (Path("/m"), Path("/m/.nodeagent-stash"))
    paths = static_pod_paths(Path("/m"), Path("/s"), procs())
    assert paths is not None and paths.stash_dir == Path("/s")
    off = tmp_path / "off.yaml"
    off.write_text("staticPodPath: ''\n")
    assert static_pod_paths(None, None, procs(), kubelet_config=off) is None


def test_first_kubelet_that_says_wins() -> None:
    choice = find_manifest_dir(
        None, procs(("kubelet", "--v=2"), ("kubelet", "--pod-manifest-path=/second"))
    )
    assert choice.path == Path("/second")


def test_default_stash_dir_is_inside_where_the_kubelet_skips_it() -> None:
    # inside: the agent may write the manifest directory only, and rename(2) cannot cross
    # mounts; the kubelet skips dot entries
    assert default_stash_dir(Path("/etc/kubernetes/manifests")) == Path(
        "/etc/kubernetes/manifests/.nodeagent-stash"
    )


def test_manifest_dir_of_kubelet_without_hints() -> None:
    assert manifest_dir_of_kubelet(KubeletProcess(1, ("kubelet",))) is None


async def test_finds_a_real_kubelet_process(tmp_path: Path) -> None:
    """A process whose name is `kubelet` (a script of that name), found through psutil."""
    script = tmp_path / "kubelet"
    script.write_text("#!/bin/sh\nread line\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    manifests = tmp_path / "manifests"
    proc = await asyncio.create_subprocess_exec(
        str(script), f"--pod-manifest-path={manifests}", stdin=asyncio.subprocess.PIPE
    )
    try:
        found = [p for p in kubelet_processes() if p.pid == proc.pid]
        assert found, "the fake kubelet was not found"
        choice = find_manifest_dir(None, lambda: found)
        assert choice.path == manifests
    finally:
        assert proc.stdin is not None
        proc.stdin.write(b"bye\n")
        await proc.stdin.drain()
        await proc.wait()
    assert os.getpid() not in [p.pid for p in kubelet_processes()]
