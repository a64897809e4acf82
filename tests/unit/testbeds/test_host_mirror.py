"""The e2e container's Debian mirror comes from the host's apt sources, never from the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeagent_testbed.nspawn import host_mirror


def apt_dir(tmp_path: Path, one_line: str = "", deb822: str = "") -> Path:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(one_line)
    (tmp_path / "sources.list.d" / "debian.sources").write_text(deb822)
    return tmp_path


def test_one_line_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODEAGENT_E2E_MIRROR", raising=False)
    apt = apt_dir(
        tmp_path,
        "# comment\ndeb [signed-by=/k.gpg] http://mirror.example/debian-security "
        "bookworm-security main\ndeb http://mirror.example/debian bookworm main\n",
    )
    assert host_mirror(apt, "bookworm") == "http://mirror.example/debian"


def test_deb822_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODEAGENT_E2E_MIRROR", raising=False)
    apt = apt_dir(
        tmp_path,
        deb822="Types: deb\nURIs: http://m.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb deb-src\n# note\nURIs: http://m.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n",
    )
    assert host_mirror(apt, "bookworm") == "http://m.example/debian"


def test_no_source_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODEAGENT_E2E_MIRROR", raising=False)
    with pytest.raises(RuntimeError, match="no apt source for Debian bookworm"):
        host_mirror(apt_dir(tmp_path), "bookworm")


def test_the_environment_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODEAGENT_E2E_MIRROR", "http://local/debian")
    assert host_mirror(apt_dir(tmp_path), "bookworm") == "http://local/debian"
