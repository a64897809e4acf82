"""The systemd unit is clean under `systemd-analyze verify`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_verifies(tmp_path: Path) -> None:
    exe = tmp_path / "nodeagent"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    unit = (ROOT / "systemd" / "nodeagent.service").read_text()
    assert "ExecStart=/opt/nodeagent/bin/nodeagent " in unit
    # same unit, with an executable that exists here
    copy = tmp_path / "nodeagent.service"
    copy.write_text(unit.replace("/opt/nodeagent/bin/nodeagent", str(exe)))
    r = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr


def test_logind_dropin_sorts_after_the_kubelets() -> None:
    dropins = list((ROOT / "systemd" / "logind.conf.d").iterdir())
    assert [d.name for d in dropins] == ["zz-nodeagent.conf"]
    assert (
        sorted(["99-kubelet.conf", "zz-nodeagent.conf", "50-unattended-upgrades.conf"])[-1]
        == "zz-nodeagent.conf"
    )
