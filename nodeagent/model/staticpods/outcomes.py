"""What the stash reports, pure values: its errors, its listing, the result of putting each
manifest back, and what recovery did."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nodeagent.model.staticpods.journal import JournalEntry

__all__ = [
    "ManifestChanged",
    "ReadOnlyStash",
    "RecoveryAction",
    "RestoreOutcome",
    "RestoreResult",
    "StashError",
    "StashListing",
    "StashUnavailable",
    "Stashed",
]


class StashError(Exception):
    """A stash operation failed; the message names the file or directory and what was kept."""


class StashUnavailable(StashError):
    """The stash cannot be used at all (missing directory, other file system, ...)."""


class ReadOnlyStash(StashUnavailable):
    """The stash directory cannot be written; nothing was touched."""


class ManifestChanged(StashError):
    """The manifest changed or vanished after it was read; it was not moved."""


@dataclass(frozen=True)
class Stashed:
    entry: JournalEntry
    payload: Path


@dataclass(frozen=True)
class StashListing:
    entries: tuple[Stashed, ...]
    problems: tuple[str, ...]  # unreadable entries, payloads without an entry


RestoreOutcome = Literal[
    "restored",  # renamed back into the manifest directory
    "identical",  # an identical file was back already; the stashed copy was dropped
    "conflict",  # another file is there under the name; ours stays in the stash
    "would-restore",  # dry run
    "would-drop-identical",  # dry run
    "error",
]


@dataclass(frozen=True)
class RestoreResult:
    entry: JournalEntry
    outcome: RestoreOutcome
    path: Path  # the manifest's path in the manifest directory
    message: str

    @property
    def ok(self) -> bool:
        return self.outcome not in ("conflict", "error")

    def __str__(self) -> str:
        return f"{self.outcome}: {self.message}"


@dataclass(frozen=True)
class RecoveryAction:
    action: Literal["rolled-forward", "rolled-back", "removed-temporary", "problem"]
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.action}: {self.message}"
