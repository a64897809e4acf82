"""When this boot's shutdown began, kept on disk so a restarted agent measures its bounds from
`PrepareForShutdown`, not from its own start.

The file holds the boot id and CLOCK_MONOTONIC seconds, which every process of one boot shares.
It lives on /run (a tmpfs: gone at reboot), in the unit's preserved RuntimeDirectory. Any
trouble reading or writing it only costs precision: the bound is then measured from now.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def shutdown_started(path: Path | None, boot_id: str, now: float) -> float:
    """The recorded start of this boot's shutdown, or `now`, recorded for a later restart."""
    if path is None:
        return now
    try:
        data = json.loads(path.read_text())
        if data.get("bootId") == boot_id and isinstance(data.get("started"), float | int):
            started = float(data["started"])
            if started <= now:
                log.info("this boot's shutdown began %.1fs ago (as recorded)", now - started)
                return started
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        log.warning("ignoring the shutdown record %s: %s", path, e)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"bootId": boot_id, "started": now}))
        tmp.replace(path)
    except OSError as e:
        log.warning("cannot record the shutdown's start in %s: %s", path, e)
    return now


def clear(path: Path | None) -> None:
    """The shutdown was cancelled: a later one starts its own count."""
    if path is not None:
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            log.warning("cannot remove the shutdown record %s: %s", path, e)
