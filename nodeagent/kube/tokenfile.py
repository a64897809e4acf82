"""A kubeconfig user's `tokenFile`: found, reread when it changes, replaced atomically.

The official client's kubeconfig loader reads `tokenFile` once and sends that token for ever
(and with the file's trailing newline, which `kubectl create token > file` leaves). A `.deb`
agent renews its token into that file (`nodeagent.node.token_renewal`), and an admin may put a
new one there: `TokenFile` replaces the loader's refresh hook, so every request's auth header
comes from the file as it is now. The transport asks for the header at most once a second; a
`stat` then tells whether the file changed, and only then is it read.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.configuration import Configuration

__all__ = ["TokenFile", "installed", "kubeconfig_token_file", "write_token"]

log = logging.getLogger(__name__)


def kubeconfig_token_file(kubeconfig: str, context: str | None = None) -> Path | None:
    """The `tokenFile` of the kubeconfig's user (of `context`, else the current one), when
    that is where its token comes from: no inline token, auth provider or exec plugin, which
    the loader would use first. Relative to the kubeconfig's directory, as kubectl reads it."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    if not isinstance(doc, dict):
        return None
    name = context or doc.get("current-context")
    context_doc = _named(doc.get("contexts"), name).get("context") or {}
    user = _named(doc.get("users"), context_doc.get("user")).get("user") or {}
    if not isinstance(user, dict) or any(k in user for k in ("token", "auth-provider", "exec")):
        return None
    token_file = user.get("tokenFile")
    if not isinstance(token_file, str) or not token_file:
        return None
    return Path(kubeconfig).resolve().parent / token_file


def _named(entries: Any, name: Any) -> dict[str, Any]:
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return {}


class TokenFile:
    """The refresh hook of a `Configuration` whose bearer token is the content of `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()  # request threads call the hook concurrently
        self._seen: tuple[int, int, int] | None = None  # (inode, mtime ns, size) last read
        self._token = ""

    def read(self) -> str:
        """The token in the file now (stripped)."""
        return self.path.read_text().strip()

    def __call__(self, configuration: Configuration) -> None:
        with self._lock:
            try:
                st = self.path.stat()
                seen = (st.st_ino, st.st_mtime_ns, st.st_size)
                if seen != self._seen:
                    self._token = self.read()
                    self._seen = seen
            except OSError as e:
                # the last token read stays in use: the API server says whether it still works
                if self._seen is not None:
                    log.warning("cannot read the token file %s: %s", self.path, e)
                    self._seen = None
            if self._token:
                configuration.api_key["BearerToken"] = "Bearer " + self._token


def installed(configuration: Configuration) -> TokenFile | None:
    """The `TokenFile` that gives the configuration its token, if one does."""
    hook = configuration.refresh_api_key_hook
    return hook if isinstance(hook, TokenFile) else None


def write_token(path: Path, token: str) -> None:
    """Replace the file's content with `token` in one step (a reader sees the old token or the
    new one, never a part), mode 0600, durable before it is in place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(token)  # no newline: the token is the whole content
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)
