"""Reading the running kubelet's Graceful Node Shutdown settings from its config files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nodeagent.node.kubelet import KubeletProcess
from nodeagent.node.kubelet_shutdown import read_kubelet_settings


def procs(*cmdlines: tuple[str, ...]) -> Callable[[], list[KubeletProcess]]:
    return lambda: [KubeletProcess(100 + i, c, None) for i, c in enumerate(cmdlines)]


def test_config_file_then_drop_ins(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("shutdownGracePeriod: 1m30s\nshutdownGracePeriodCriticalPods: 30s\n")
    drop_ins = tmp_path / "conf.d"
    drop_ins.mkdir()
    (drop_ins / "50-off.conf").write_text("shutdownGracePeriod: 0s\n")
    (drop_ins / "ignored.yaml").write_text("shutdownGracePeriod: 5s\n")
    found = procs(("kubelet", f"--config={config}", "--config-dir", str(drop_ins)))
    settings, problem = read_kubelet_settings(found, tmp_path / "none")
    assert problem is None and settings is not None
    assert (settings.grace_period, settings.critical_grace_period) == (0.0, 30.0)
    assert str(drop_ins / "50-off.conf") in settings.source


def test_no_config_flag_means_defaults_off(tmp_path: Path) -> None:
    settings, problem = read_kubelet_settings(procs(("kubelet",)), tmp_path / "none")
    assert problem is None and settings is not None and not settings.enabled


def test_no_kubelet_falls_back_to_kubeadms_file(tmp_path: Path) -> None:
    kubeadm = tmp_path / "config.yaml"
    kubeadm.write_text("shutdownGracePeriod: 30s\n")
    settings, _ = read_kubelet_settings(list, kubeadm)
    assert settings is not None and settings.enabled
    assert read_kubelet_settings(list, tmp_path / "none") == (None, None)


def test_hostile_files_are_a_problem_not_a_crash(tmp_path: Path) -> None:
    cases = {
        "yaml.yaml": b"shutdownGracePeriod: [30s\n",
        "binary.yaml": b"\x00\xff\xfe garbage \x80",
        "dur.yaml": b"shutdownGracePeriod: thirty seconds\n",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        settings, problem = read_kubelet_settings(procs(("kubelet", "--config", str(path))))
        assert settings is None, name
        assert problem is not None and str(path) in problem and "\n" not in problem, problem
    missing = tmp_path / "missing.yaml"
    settings, problem = read_kubelet_settings(procs(("kubelet", "--config", str(missing))))
    assert settings is None and problem is not None and str(missing) in problem
    dur = tmp_path / "dur.yaml"
    _, problem = read_kubelet_settings(procs(("kubelet", "--config", str(dur))))
    assert problem is not None and "shutdownGracePeriod" in problem
