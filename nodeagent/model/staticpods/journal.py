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
        doc = _document(data, where)
        entry_id = _matching(doc, "id", _ID, where)
        state = _state(doc, where)
        sha = _matching(doc, "sha256", _SHA256, where)
        original = _original_path(doc, where)
        size = _size(doc, where)
        shutdown = _shutdown(doc, where)
        restore_name = _restore_name(doc, state, where)
        return cls(
            id=entry_id,
            state=state,
            original_path=original,
            sha256=sha,
            size=size,
            maintenance=_text(doc, "maintenance", where),
            shutdown=shutdown,
            boot_id=_text(doc, "boot_id", where),
            node=_text(doc, "node", where),
            pod_namespace=_text(doc, "pod_namespace", where),
            pod_name=_text(doc, "pod_name", where),
            stashed_at=_text(doc, "stashed_at", where),
            restore_name=restore_name,
        )


# Parsing an entry file: each reads one field of the document (`where`: the file, for errors).


def _document(data: bytes, where: str) -> dict[str, Any]:
    """The entry's JSON object, of the version this code writes."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise JournalError(f"{where}: not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise JournalError(f"{where}: not a JSON object")
    if doc.get("version") != VERSION:
        raise JournalError(f"{where}: unknown journal version {doc.get('version')!r}")
    return doc


def _text(doc: dict[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise JournalError(f"{where}: {key} must be a non-empty string")
    return value


def _matching(doc: dict[str, Any], key: str, pattern: re.Pattern[str], where: str) -> str:
    value = _text(doc, key, where)
    if not pattern.match(value):
        raise JournalError(f"{where}: malformed {key} {value!r}")
    return value


def _state(doc: dict[str, Any], where: str) -> State:
    try:
        return State(str(doc.get("state")))
    except ValueError:
        raise JournalError(f"{where}: unknown state {doc.get('state')!r}") from None


def _original_path(doc: dict[str, Any], where: str) -> str:
    original = _text(doc, "original_path", where)
    if not original.startswith("/") or original.endswith("/"):
        raise JournalError(f"{where}: original_path must be an absolute file path")
    return original


def _size(doc: dict[str, Any], where: str) -> int:
    size = doc.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise JournalError(f"{where}: size must be a non-negative integer")
    return size


def _shutdown(doc: dict[str, Any], where: str) -> bool:
    shutdown = doc.get("shutdown")
    if not isinstance(shutdown, bool):
        raise JournalError(f"{where}: shutdown must be true or false")
    return shutdown


def _restore_name(doc: dict[str, Any], state: State, where: str) -> str | None:
    """The file name the manifest is renamed back to; an entry in state `restoring` has one."""
    if doc.get("restore_name") is None:
        if state is State.RESTORING:
            raise JournalError(f"{where}: state restoring needs restore_name")
        return None
    restore_name = _text(doc, "restore_name", where)
    if "/" in restore_name or restore_name in (".", ".."):
        raise JournalError(f"{where}: restore_name must be a file name")
    return restore_name
