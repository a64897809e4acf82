"""What the end-to-end tests add to the test bed's systemd-nspawn container
(nodeagent_testbed.nspawn): the skip where it cannot boot, and the agent installed inside it
from wheels, with a kubeconfig that names no host file."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml


def require_tools() -> None:
    """Skip, saying why, where the end-to-end tests cannot run (CI installs all of this)."""
    if os.geteuid() != 0:
        pytest.skip("end-to-end tests boot a container with systemd-nspawn: they need root")
    for tool in ("systemd-nspawn", "debootstrap", "nsenter"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup installs it)")


def agent_kubeconfig(source: Path) -> dict[str, Any]:
    """The agent's kubeconfig with every file it names inlined: the container sees none of the
    host's files."""
    doc: dict[str, Any] = yaml.safe_load(source.read_text())
    for section, fields in (
        ("clusters", ("certificate-authority",)),
        ("users", ("client-certificate", "client-key")),
    ):
        for entry in doc[section]:
            inner = entry["cluster" if section == "clusters" else "user"]
            for f in fields:
                if f in inner:
                    inner[f + "-data"] = base64.b64encode(Path(inner.pop(f)).read_bytes()).decode()
    return doc


def wheelhouse(dest: Path) -> Path:
    """nodeagent and its dependencies as wheels, for an install without network."""
    project = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "-w", str(dest), str(project)],
        check=True,
    )
    return dest
