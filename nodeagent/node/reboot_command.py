"""`nodeagent reboot`: ask the node's running agent for a coordinated reboot, or call it off.

The command talks to no API server: it writes the request file the agent watches
(`reboot.requestFile`, its reason inside), atomically, and `--cancel` removes it. The agent then
creates (or completes) this boot's reboot request maintenance.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import tempfile
from pathlib import Path
from typing import TextIO

from nodeagent.config import ConfigError, RebootConfig, load
from nodeagent.model.names import LABEL_TRIGGER
from nodeagent.model.shutdown import TRIGGER_REBOOT

__all__ = ["DEFAULT_CONFIG", "reboot_command"]

DEFAULT_CONFIG = Path("/etc/nodeagent/config.yaml")


def reboot_command(
    config_path: Path | None,
    request_file: Path | None,
    reason: str | None,
    *,
    cancel: bool,
    out: TextIO,
    err: TextIO,
) -> int:
    """Write (or with `cancel` remove) the request file: `request_file`, else the configuration's
    (`config_path`, else DEFAULT_CONFIG where it exists) `reboot.requestFile`."""
    reboot = RebootConfig()
    if config_path is None and DEFAULT_CONFIG.is_file():
        config_path = DEFAULT_CONFIG
    if config_path is not None:
        try:
            reboot = load(config_path).reboot
        except ConfigError as e:
            print(f"nodeagent reboot: {e}", file=err)
            return 2
    path = request_file or reboot.request_file
    follow = f"kubectl get nm -l {LABEL_TRIGGER}={TRIGGER_REBOOT} -w"
    if cancel:
        try:
            path.unlink()
        except FileNotFoundError:
            print(f"no reboot was asked for with nodeagent reboot (no {path})", file=out)
            return 0
        except OSError as e:
            print(f"nodeagent reboot: cannot remove {path}: {e.strerror}", file=err)
            return 1
        print(
            f"removed {path}: the agent completes this boot's reboot request, unless something "
            f"else still requires a reboot (a sentinel); follow it with: {follow}",
            file=out,
        )
        return 0
    text = reason or f"asked by {_who()} with nodeagent reboot"
    try:
        _write_atomically(path, " ".join(text.split()) + "\n")
    except OSError as e:
        print(f"nodeagent reboot: cannot write {path}: {e.strerror}", file=err)
        return 1
    print(
        f"asked the agent for a reboot ({text}): wrote {path}. It creates a NodeMaintenance for "
        "this node, which waits for its drain slot and drains; once Drained the node reboots. "
        f"Follow it with: {follow}; call it off with: nodeagent reboot --cancel",
        file=out,
    )
    if config_path is not None and not reboot.enabled:
        print(
            f"warning: {config_path} has reboot.enabled: false: the agent does not act on it",
            file=err,
        )
    return 0


def _who() -> str:
    user = os.environ.get("SUDO_USER")
    if user:
        return user
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def _write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: a new file renamed into place (one event for
    the agent's watch, never a half-written reason)."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.chmod(0o644)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
