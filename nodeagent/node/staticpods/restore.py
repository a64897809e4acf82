"""Putting stashed manifests back without the API server: at start-up (before the kubelet) and
by hand (`nodeagent restore-static-pods`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from nodeagent.model.staticpods.journal import JournalEntry
from nodeagent.model.staticpods.outcomes import RecoveryAction, RestoreResult, StashError
from nodeagent.node.boot import read_boot_id
from nodeagent.node.staticpods.locate import static_pod_paths
from nodeagent.node.staticpods.stash import Stash

__all__ = ["RestoreReport", "restore_after_reboot", "restore_by_hand", "restore_command"]

log = logging.getLogger(__name__)


@dataclass
class RestoreReport:
    manifest_dir: Path
    stash_dir: Path
    recovery: list[RecoveryAction] = field(default_factory=list)
    results: list[RestoreResult] = field(default_factory=list)
    kept: list[JournalEntry] = field(default_factory=list)  # stashed, not selected
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        """Nothing needs a human: no conflict, no error, no recovery problem."""
        return all(r.ok for r in self.results) and not any(
            a.action == "problem" for a in self.recovery
        )

    def lines(self) -> list[str]:
        """One line per thing done (or, in a dry run, to be done), for people."""
        out: list[str] = []
        prefix = "would " if self.dry_run else ""
        for a in self.recovery:
            label = "PROBLEM" if a.action == "problem" else prefix + a.action
            out.append(f"{label}: {a.message}")
        for r in self.results:
            e = r.entry
            why = (
                f"maintenance {e.maintenance}, stashed {e.stashed_at}, "
                f"pod {e.pod_namespace}/{e.pod_name}"
            )
            out.append(f"{r.outcome}: {r.message} ({why})")
        for e in self.kept:
            out.append(
                f"kept: {self.stash_dir / e.payload_name} ({e.original_path}, maintenance "
                f"{e.maintenance}) stays aside"
            )
        if not out:
            out.append(f"nothing to restore: {self.stash_dir} holds no manifests")
        return out


def restore_after_reboot(
    manifest_dir: Path, stash_dir: Path, *, boot_id: str | None = None
) -> RestoreReport:
    """At start-up, before the kubelet starts: recover the stash, then put back the manifests a
    shutdown maintenance of an earlier boot moved aside (that shutdown is over, and the node
    must be able to come back, e.g. with its API server). Manifests moved aside for other
    maintenances stay: the interceptor restores them once those complete.

    Needs no API server. A missing stash directory means nothing to do. Raises StashError
    (with a clear message) when the stash cannot be used.
    """
    current = boot_id if boot_id is not None else read_boot_id()
    report = RestoreReport(manifest_dir, stash_dir)
    if not stash_dir.exists():
        return report
    with Stash(manifest_dir, stash_dir, boot_id=current) as stash:
        report.manifest_dir, report.stash_dir = stash.manifest_dir, stash.stash_dir
        report.recovery = stash.recover()

        def earlier_shutdown(entry: JournalEntry) -> bool:
            return entry.shutdown and entry.boot_id != current

        report.results = stash.restore_all(earlier_shutdown)
        report.kept = [s.entry for s in stash.contents().entries if not earlier_shutdown(s.entry)]
    for line in report.lines():
        log.info("static pods at start-up: %s", line)
    return report


def restore_by_hand(manifest_dir: Path, stash_dir: Path, *, dry_run: bool = False) -> RestoreReport:
    """Put every stashed manifest back (`nodeagent restore-static-pods`). With `dry_run`,
    change nothing and say what would be done."""
    report = RestoreReport(manifest_dir, stash_dir, dry_run=dry_run)
    if not stash_dir.exists():
        return report
    stash = Stash(manifest_dir, stash_dir)
    stash.open(create=False, writable=not dry_run)
    try:
        report.manifest_dir, report.stash_dir = stash.manifest_dir, stash.stash_dir
        report.recovery = stash.recover(dry_run=dry_run)
        report.results = stash.restore_all(dry_run=dry_run)
    finally:
        stash.close()
    return report


def restore_command(
    manifest_dir: Path | None,
    stash_dir: Path | None,
    *,
    dry_run: bool = False,
    after_reboot: bool = False,
    out: TextIO,
    err: TextIO,
) -> int:
    """`nodeagent restore-static-pods`: find the directories, restore, list what was done.
    Exit status 0 when nothing needs a human, 1 when a conflict or problem is left, 2 when the
    stash cannot be used at all."""
    if after_reboot and dry_run:
        print("nodeagent: --after-reboot cannot be combined with --dry-run", file=err)
        return 2
    paths = static_pod_paths(manifest_dir, stash_dir)
    if paths is None:
        print(
            "nodeagent: the kubelet runs with static pods turned off; give --manifest-dir", file=err
        )
        return 2
    print(f"manifest directory: {paths.manifest_dir} ({paths.source})", file=out)
    print(f"stash directory: {paths.stash_dir}", file=out)
    try:
        if after_reboot:
            report = restore_after_reboot(paths.manifest_dir, paths.stash_dir)
        else:
            report = restore_by_hand(paths.manifest_dir, paths.stash_dir, dry_run=dry_run)
    except (StashError, OSError) as e:
        print(f"nodeagent: {e}", file=err)
        return 2
    for line in report.lines():
        print(line, file=out)
    return 0 if report.ok else 1
