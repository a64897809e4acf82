"""Journal entries of the stash: one small JSON file per manifest moved aside.

An entry records where the manifest came from, the SHA-256 of its bytes, the maintenance it
was moved for (its `Owner`), and the boot it was moved in. Its `state` says how far the move got:

- `stashing`: written (and fsynced) before the manifest is renamed into the stash;
- `stashed`: the manifest is in the stash;
- `restoring`: written before the manifest is renamed back (to `restore_name`).

Entries are replaced atomically (write a temporary file, fsync, rename, fsync the directory);
an entry file that does not parse is never guessed at or removed.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

__all__ = ["ENTRY_SUFFIX", "PAYLOAD_SUFFIX", "JournalEntry", "JournalError", "Owner", "State"]

ENTRY_SUFFIX = ".journal"
PAYLOAD_SUFFIX = ".manifest"
VERSION = 1
_ID = re.compile(r"^[0-9]{8}T[0-9]{12}Z-[0-9a-f]{8}$")  # UTC time to the microsecond
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class JournalError(ValueError):
    """A journal entry file is malformed."""


class State(StrEnum):
    STASHING = "stashing"
    STASHED = "stashed"
    RESTORING = "restoring"


@dataclass(frozen=True)
class Owner:
    """Why a manifest is moved aside."""

    maintenance: str
    shutdown: bool  # the maintenance is the agent's own shutdown maintenance
    node: str


@dataclass(frozen=True)
class JournalEntry:
    id: str
    state: State
    original_path: str  # absolute path of the manifest in the manifest directory
    sha256: str  # of the manifest's bytes
    size: int
    maintenance: str  # the NodeMaintenance it was moved aside for
    shutdown: bool  # that maintenance is the agent's shutdown maintenance
    boot_id: str  # /proc/sys/kernel/random/boot_id when it was moved aside
    node: str
    pod_namespace: str
    pod_name: str  # the mirror pod's name
    stashed_at: str  # RFC 3339
    restore_name: str | None = None  # set in state `restoring`

    @property
    def original_name(self) -> str:
        return self.original_path.rsplit("/", 1)[-1]

    @property
    def entry_name(self) -> str:
        return self.id + ENTRY_SUFFIX

    @property
    def payload_name(self) -> str:
        return self.id + PAYLOAD_SUFFIX

    @property
    def pod_key(self) -> tuple[str, str]:
        return self.pod_namespace, self.pod_name

    def with_state(self, state: State, **changes: Any) -> JournalEntry:
        return replace(self, state=state, **changes)

    def to_bytes(self) -> bytes:
        doc = {"version": VERSION, **asdict(self), "state": self.state.value}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> JournalEntry:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise JournalError(f"{where}: not valid JSON: {e}") from e
        if not isinstance(doc, dict):
            raise JournalError(f"{where}: not a JSON object")
        if doc.get("version") != VERSION:
            raise JournalError(f"{where}: unknown journal version {doc.get('version')!r}")

        def text(key: str, *, optional: bool = False) -> Any:
            value = doc.get(key)
            if value is None and optional:
                return None
            if not isinstance(value, str) or not value:
                raise JournalError(f"{where}: {key} must be a non-empty string")
            return value

        entry_id = text("id")
        if not _ID.match(entry_id):
            raise JournalError(f"{where}: malformed id {entry_id!r}")
        try:
            state = State(str(doc.get("state")))
        except ValueError:
            raise JournalError(f"{where}: unknown state {doc.get('state')!r}") from None
        sha = text("sha256")
        if not _SHA256.match(sha):
            raise JournalError(f"{where}: malformed sha256 {sha!r}")
        original = text("original_path")
        if not original.startswith("/") or original.endswith("/"):
            raise JournalError(f"{where}: original_path must be an absolute file path")
        size = doc.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise JournalError(f"{where}: size must be a non-negative integer")
        shutdown = doc.get("shutdown")
        if not isinstance(shutdown, bool):
            raise JournalError(f"{where}: shutdown must be true or false")
        restore_name = text("restore_name", optional=True)
        if restore_name is not None and ("/" in restore_name or restore_name in (".", "..")):
            raise JournalError(f"{where}: restore_name must be a file name")
        if state is State.RESTORING and restore_name is None:
            raise JournalError(f"{where}: state restoring needs restore_name")
        return cls(
            id=entry_id,
            state=state,
            original_path=original,
            sha256=sha,
            size=size,
            maintenance=text("maintenance"),
            shutdown=shutdown,
            boot_id=text("boot_id"),
            node=text("node"),
            pod_namespace=text("pod_namespace"),
            pod_name=text("pod_name"),
            stashed_at=text("stashed_at"),
            restore_name=restore_name,
        )
