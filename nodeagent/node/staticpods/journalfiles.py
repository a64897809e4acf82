"""The journal on disk: each entry file in the stash directory beside its payload (the manifest
moved aside), replaced atomically; reading and listing them. The operations that move manifests
(`moveaside`, `moveback`, `recovery`) work through an open `JournalFiles`."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from nodeagent.model.staticpods.journal import (
    ENTRY_SUFFIX,
    PAYLOAD_SUFFIX,
    JournalEntry,
    JournalError,
)
from nodeagent.model.staticpods.manifests import MAX_MANIFEST_BYTES
from nodeagent.node.staticpods.directories import PROBE_PREFIX
from nodeagent.node.staticpods.fsops import DirHandle, StepHook

__all__ = ["TMP_SUFFIX", "JournalFiles", "StashScan"]

TMP_SUFFIX = ".tmp"
_MAX_ENTRY_BYTES = 1 << 20


@dataclass(frozen=True)
class StashScan:
    """What the stash directory holds."""

    entries: list[JournalEntry]
    problems: list[str]  # unreadable entries, payloads without an entry
    temporary: list[str]  # names of unfinished entry writes and write probes


@dataclass(frozen=True)
class JournalFiles:
    """An open stash: its two directories, and `step`, called after every change on disk (crash
    tests kill there)."""

    manifests: DirHandle
    stash: DirHandle
    step: StepHook

    def write_entry(self, entry: JournalEntry, step: str) -> None:
        """Write `entry` in place of its file, atomically and durably."""
        s = self.stash
        tmp = entry.entry_name + TMP_SUFFIX
        if s.exists(tmp):
            s.unlink(tmp)
        s.write_durable(tmp, entry.to_bytes())
        self.step(step + ".entry-written")
        s.replace(tmp, entry.entry_name)
        self.step(step + ".entry-renamed")
        s.fsync()
        self.step(step + ".entry-synced")

    def delete_entry(self, entry: JournalEntry, step: str) -> None:
        s = self.stash
        s.unlink(entry.entry_name)
        self.step(step + ".entry-removed")
        s.fsync()
        self.step(step + ".entry-synced")

    def sync_both(self, step: str) -> None:
        """fsync both directories, so that a finished move is durable."""
        self.manifests.fsync()
        self.stash.fsync()
        self.step(step + ".synced")

    def read_payload(self, entry: JournalEntry) -> tuple[bytes, os.stat_result]:
        return self.stash.read_regular(entry.payload_name, MAX_MANIFEST_BYTES)

    def new_id(self, now: datetime) -> str:
        """An entry id, ordered by time, whose files do not exist yet."""
        stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        while True:
            entry_id = f"{stamp}-{secrets.token_hex(4)}"
            names = (
                entry_id + ENTRY_SUFFIX,
                entry_id + PAYLOAD_SUFFIX,
                entry_id + ENTRY_SUFFIX + TMP_SUFFIX,
            )
            if not any(self.stash.exists(n) for n in names):
                return entry_id

    def scan(self) -> StashScan:
        s = self.stash
        entries: list[JournalEntry] = []
        problems: list[str] = []
        temporary: list[str] = []
        names = s.names()
        ids: set[str] = set()
        for name in names:
            # unfinished journal writes, and write probes a kill left behind
            if name.endswith(TMP_SUFFIX) or name.startswith(PROBE_PREFIX):
                temporary.append(name)
            elif name.endswith(ENTRY_SUFFIX):
                try:
                    entry = self._read_entry(name)
                except JournalError as e:
                    problems.append(f"{e}; the entry and its manifest are left alone")
                    ids.add(name[: -len(ENTRY_SUFFIX)])
                    continue
                entries.append(entry)
                ids.add(entry.id)
        for name in names:
            if name.endswith(PAYLOAD_SUFFIX) and name[: -len(PAYLOAD_SUFFIX)] not in ids:
                problems.append(
                    f"{s.path / name}: a stashed manifest without a journal entry; left alone "
                    "(move it back by hand if it belongs in the manifest directory)"
                )
        return StashScan(entries, problems, temporary)

    def _read_entry(self, name: str) -> JournalEntry:
        where = str(self.stash.path / name)
        try:
            data, _ = self.stash.read_regular(name, _MAX_ENTRY_BYTES)
        except OSError as e:
            raise JournalError(f"{where}: cannot be read: {e.strerror or e}") from e
        entry = JournalEntry.from_bytes(data, where)
        if entry.entry_name != name:
            raise JournalError(f"{where}: holds the entry of {entry.id}")
        return entry
