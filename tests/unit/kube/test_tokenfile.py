"""A kubeconfig's tokenFile: found, followed by the client's auth header, replaced atomically
(nodeagent.kube.tokenfile)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from nodeagent.kube.connection import load_api_client
from nodeagent.kube.tokenfile import TokenFile, installed, kubeconfig_token_file, write_token


def kubeconfig(where: Path, user: dict[str, object], *, current: str = "agent") -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "nodeagent", "user": user}, {"name": "admin", "user": {"token": "a"}}],
        "contexts": [
            {"name": "agent", "context": {"cluster": "c", "user": "nodeagent"}},
            {"name": "admin", "context": {"cluster": "c", "user": "admin"}},
        ],
        "current-context": current,
    }
    path = where / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_token_file_is_found_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, {"tokenFile": "token"})
    assert kubeconfig_token_file(str(config)) == tmp_path / "token"
    absolute = kubeconfig(tmp_path, {"tokenFile": "/var/lib/nodeagent/token"})
    assert kubeconfig_token_file(str(absolute)) == Path("/var/lib/nodeagent/token")
    # another context's user, or a token the loader takes before the file
    assert kubeconfig_token_file(str(config), "admin") is None
    both = kubeconfig(tmp_path, {"tokenFile": "token", "token": "inline"})
    assert kubeconfig_token_file(str(both)) is None
    exec_plugin = kubeconfig(tmp_path, {"tokenFile": "token", "exec": {"command": "x"}})
    assert kubeconfig_token_file(str(exec_plugin)) is None
    certificate = kubeconfig(tmp_path, {"client-certificate": "c", "client-key": "k"})
    assert kubeconfig_token_file(str(certificate)) is None


def bearer(config: object) -> str:
    settings = config.auth_settings()  # type: ignore[attr-defined]
    return str(settings["BearerToken"]["value"])


def test_the_client_follows_the_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")  # as `kubectl create token > token` writes it
    transport = load_api_client(str(kubeconfig(tmp_path, {"tokenFile": "token"})))
    found = installed(transport.configuration)
    assert found is not None and found.path == token
    assert bearer(transport.configuration) == "Bearer first"
    write_token(token, "second")
    assert bearer(transport.configuration) == "Bearer second"
    # a file gone keeps the last token: the API server says whether it still works
    token.unlink()
    assert bearer(transport.configuration) == "Bearer second"
    write_token(token, "third")
    assert bearer(transport.configuration) == "Bearer third"


def test_other_kubeconfigs_keep_the_loaders_hook(tmp_path: Path) -> None:
    transport = load_api_client(str(kubeconfig(tmp_path, {"token": "inline"})))
    assert installed(transport.configuration) is None
    assert bearer(transport.configuration) == "Bearer inline"


def test_a_file_changed_to_the_same_size_is_read_again(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("aaaa")
    hook = TokenFile(token)
    transport = load_api_client(str(kubeconfig(tmp_path, {"tokenFile": "token"})))
    hook(transport.configuration)
    write_token(token, "bbbb")  # a new inode, whatever the size and mtime
    hook(transport.configuration)
    assert transport.configuration.api_key["BearerToken"] == "Bearer bbbb"


def test_write_token_replaces_the_file_whole_and_private(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    token.chmod(0o644)
    write_token(token, "new")
    assert token.read_text() == "new"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["token"]  # no temporary file left


def test_write_token_leaves_the_old_file_when_it_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("old")

    def no_space(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError):
        write_token(token, "new")
    assert token.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["token"]
