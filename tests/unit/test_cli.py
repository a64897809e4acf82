"""The product's command line and the testbed's subcommands: `nodeagent demo` and `nodeagent sim`
come from the entry-point group the nodeagent-testbed distribution registers; where it is not
installed (the .deb, the image) they fail in one line that says what is missing."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from nodeagent import cli

NEEDS = "needs the nodeagent-testbed distribution: scripts/setup installs it"


def test_the_testbed_registers_demo_and_sim() -> None:
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=cli.COMMANDS)}
    assert found == {
        "demo": "nodeagent_testbed.cli:add_demo",
        "sim": "nodeagent_testbed.cli:add_sim",
    }
    assert set(found) == set(cli.TESTBED_COMMANDS)
    dist = importlib.metadata.distribution("nodeagent-testbed")
    assert {ep.name for ep in dist.entry_points if ep.group == cli.COMMANDS} == set(found)


def test_building_the_parser_imports_no_simulator() -> None:
    """`nodeagent run` and `--help` load the testbed's parsers only, not its ~6 MiB of sim."""
    code = (
        "import sys; from nodeagent import cli; cli.build_parser(); "
        "print(sorted(m for m in sys.modules if m.startswith('nodeagent_testbed')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['nodeagent_testbed', 'nodeagent_testbed.cli']"


@pytest.mark.parametrize(
    "argv",
    [
        ["demo"],
        ["demo", "--help"],
        ["demo", "--speed", "3"],
        ["sim", "serve", "--nodes", "1", "--kubeconfig", "k"],
        ["sim", "-h"],
    ],
)
def test_without_the_testbed_its_commands_say_so_in_one_line(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.metadata.entry_points

    def without_testbed(*, group: str) -> importlib.metadata.EntryPoints:
        return importlib.metadata.EntryPoints(()) if group == cli.COMMANDS else real(group=group)

    monkeypatch.setattr(importlib.metadata, "entry_points", without_testbed)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"nodeagent {argv[0]} {NEEDS}\n"


def test_without_the_testbed_help_lists_its_commands_as_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda **_: importlib.metadata.EntryPoints(())
    )
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "demo reboot node-1 of a simulated cluster" in out
    assert "(needs nodeagent-testbed)" in out
    for command in ("run", "manifests", "restore-static-pods"):
        assert command in out


def test_with_the_testbed_demo_has_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["demo", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("--speed", "--json", "--verbose"):
        assert option in out


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"nodeagent {importlib.metadata.version('nodeagent')}\n"


# --- bad input: one line and a non-zero exit, never a traceback ------------------------------


def _agent_config(tmp_path: Path, kubeconfig: Path) -> Path:
    """A configuration that reaches the kubeconfig first (no logind, no static pods)."""
    path = tmp_path / "config.yaml"
    path.write_text(
        f"nodeName: node-1\nrunControllers: false\nkube:\n  kubeconfig: {kubeconfig}\n"
        "shutdown:\n  enabled: false\nstaticPods:\n  enabled: false\n"
    )
    return path


BAD_KUBECONFIGS = {
    "not a mapping": ("node-1\n", "is not a kubeconfig"),
    "not YAML": ("apiVersion: v1\nclusters: [\n", "is not YAML at line 3"),
    "missing": (None, "cannot read"),
}


@pytest.mark.parametrize("what", sorted(BAD_KUBECONFIGS))
@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_bad_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, command: str
) -> None:
    text, said = BAD_KUBECONFIGS[what]
    kubeconfig = tmp_path / "kubeconfig"
    if text is not None:
        kubeconfig.write_text(text)
    if command == "run":
        argv = ["run", "--config", str(_agent_config(tmp_path, kubeconfig))]
    else:
        argv = ["plan", "--kubeconfig", str(kubeconfig), "node-1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("nodeagent")]
    assert len(errors) == 1, err
    assert said in errors[0] and str(kubeconfig) in errors[0]
    assert "Traceback" not in err


def test_an_unknown_log_level_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--log-level", "bogus", "manifests", "crds"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --log-level: invalid choice: 'BOGUS'" in err
    assert "Traceback" not in err


def test_the_log_level_flag_is_honoured_by_run(tmp_path: Path) -> None:
    """`nodeagent --log-level DEBUG run` logs DEBUG lines whatever observability.logLevel says
    (the kubeconfig's loader logs its steps at DEBUG before it fails here)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    config = _agent_config(tmp_path, kubeconfig)
    config.write_text(config.read_text() + "observability:\n  logLevel: WARNING\n")
    argv = [sys.executable, "-m", "nodeagent", "--log-level", "debug", "run", "--config"]
    out = subprocess.run([*argv, str(config)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert " DEBUG " in out.stderr, out.stderr
    quiet = subprocess.run(argv[:3] + argv[5:] + [str(config)], capture_output=True, text=True)
    assert quiet.returncode == 2 and " DEBUG " not in quiet.stderr, quiet.stderr
