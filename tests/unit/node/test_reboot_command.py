"""`nodeagent reboot`: the request file written whole with its reason, removed by --cancel, its
path from the flag or the configuration; a configuration that does not enable reboots is
said."""

from __future__ import annotations

import io
from pathlib import Path

from nodeagent.cli import main
from nodeagent.node.reboot_command import reboot_command


def run(*args: str, config: Path | None = None, reason: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    request = Path(args[0]) if args else None
    code = reboot_command(config, request, reason, cancel="--cancel" in args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_asks_and_cancels(tmp_path: Path) -> None:
    path = tmp_path / "run" / "nodeagent" / "reboot-requested"
    code, out, _ = run(str(path), reason="kernel\n6.12")
    assert code == 0
    assert path.read_text() == "kernel 6.12\n"
    assert "kubectl get nm -l nodeagent.io/trigger=reboot -w" in out
    assert [p.name for p in path.parent.iterdir()] == [path.name], "no temporary file left"
    code, out, _ = run(str(path), "--cancel")
    assert code == 0 and not path.exists() and "removed" in out
    code, out, _ = run(str(path), "--cancel")
    assert code == 0 and "no reboot was asked for" in out


def test_the_path_and_the_warning_come_from_the_configuration(tmp_path: Path) -> None:
    path = tmp_path / "asked"
    config = tmp_path / "config.yaml"
    config.write_text(f"reboot:\n  requestFile: {path}\n")
    code, _, err = run(config=config)
    assert code == 0 and path.read_text().startswith("asked by ")
    assert "reboot.enabled: false" in err
    config.write_text(f"reboot:\n  enabled: true\n  requestFile: {path}\n")
    code, _, err = run(config=config)
    assert code == 0 and err == ""


def test_a_broken_configuration_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("reboot:\n  requestFile: relative\n")
    code, _, err = run(config=config)
    assert code == 2
    assert "reboot.requestFile" in err and err.count("\n") == 1


def test_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run(str(blocker / "below"))
    assert code == 1 and "cannot write" in err and err.count("\n") == 1


def test_the_cli_has_the_subcommand(tmp_path: Path) -> None:
    path = tmp_path / "req"
    assert main(["reboot", "--request-file", str(path), "--reason", "why"]) == 0
    assert path.read_text() == "why\n"
    assert main(["reboot", "--request-file", str(path), "--cancel"]) == 0
    assert not path.exists()
