"""The two distributions of the repository, built as wheels from the sources as the .deb and the
image build them: the node agent's (pyproject.toml) carries the agent only, even with testbed/
beside it; the test bed's (testbed/pyproject.toml) carries the simulated cluster and logind and the
demo, and registers `nodeagent demo` and `nodeagent sim`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
TESTBED = re.compile(r"nodeagent[_-]testbed|(^|/)nodeagent/(sim|demo)/|fake_?logind|logind/fake")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{distribution: its wheel}, built from a clean copy of the sources (an
    in-tree build would reuse build/)."""
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("wheels")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("nodeagent", "testbed"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for project in (src, src / "testbed"):
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        r = subprocess.run(
            [*pip, "wheel", "--quiet", "--no-deps", "-w", str(out), str(project)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
    found = {wheel.name.split("-")[0]: wheel for wheel in out.glob("*.whl")}
    assert set(found) == {"nodeagent", "nodeagent_testbed"}, found
    return found


def test_the_node_agents_wheel_carries_the_agent_only(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["nodeagent"]) as z:
        files = z.namelist()
    assert not [f for f in files if TESTBED.search(f)]
    assert {f.split("/")[0] for f in files} == {"nodeagent", f"nodeagent-{VERSION}.dist-info"}
    for needed in ("nodeagent/cli.py", "nodeagent/app.py", "nodeagent/py.typed"):
        assert needed in files
    assert [f for f in files if f.startswith("nodeagent/manifests/crds/") and f.endswith(".yaml")]


def test_the_testbeds_wheel_carries_the_sim_the_demo_and_the_fake_logind(
    built: dict[str, Path],
) -> None:
    with zipfile.ZipFile(built["nodeagent_testbed"]) as z:
        files = z.namelist()
        entry_points = z.read(f"nodeagent_testbed-{VERSION}.dist-info/entry_points.txt").decode()
    for needed in (
        "nodeagent_testbed/sim/server.py",
        "nodeagent_testbed/sim/actors/kubelet.py",
        "nodeagent_testbed/demo/run.py",
        "nodeagent_testbed/fakelogind.py",
        "nodeagent_testbed/cli.py",
        "nodeagent_testbed/py.typed",
    ):
        assert needed in files
    assert not [f for f in files if f.startswith("nodeagent/")]
    assert "[nodeagent.commands]" in entry_points
    assert "demo = nodeagent_testbed.cli:add_demo" in entry_points
    assert "sim = nodeagent_testbed.cli:add_sim" in entry_points


@pytest.mark.parametrize("distribution", ["nodeagent", "nodeagent_testbed"])
def test_the_license_is_an_spdx_expression(built: dict[str, Path], distribution: str) -> None:
    # the TOML-table form (license = { text = ... }) is refused by setuptools from 2027-02-18
    with zipfile.ZipFile(built[distribution]) as z:
        metadata = z.read(f"{distribution}-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
