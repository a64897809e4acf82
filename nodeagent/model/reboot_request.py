"""A reboot asked for (`nodeagent reboot`, a reboot-required sentinel): what the node's agent does
next about this boot's reboot request maintenance, and when a sentinel still counts.

Pure. The maintenance itself (its name, labels, reading one back) is `nodeagent.model.shutdown`'s
(trigger reboot); the coordinator that acts on these decisions is
`nodeagent.node.coordinated_reboot`.

The rules:
- While a reboot is required, this boot's request exists (created, or adopted when one of this
  boot is live). Only `Drained=True` on it, as last seen, reboots the node: a drain that cannot
  finish waits (the maintenance's drainMessage says why), and a request not known to be drained
  (the API server hangs, the request was deleted) never reboots.
- When the requirement goes away before the reboot (the sentinel removed, `nodeagent reboot
  --cancel`), the request is completed (the node is uncordoned) and deleted.
- A request of this boot that is Complete (or was deleted) while the reboot is still required is
  asked for again: its Complete copy is deleted first (its stage cannot go back and the name is
  the boot's only one). To call a reboot off, remove what requires it.
- A sentinel file last written before this boot began is stale (`sentinel_counts`): the reboot
  it asked for has happened, whatever did not clear it. It requires a reboot again only once it
  is written again. So a sentinel that outlives the reboot (kured's loop) asks once, not at each
  boot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from nodeagent.model import shutdown as model
from nodeagent.model.bodies import deleting, spec_stage

__all__ = ["Action", "next_action", "request_of_boot", "requested_reason", "sentinel_counts"]

Action = Literal["create", "wait", "reboot", "complete", "delete", "idle"]
"""What the coordinator does next: `create` this boot's request; `wait` for the next change
(the drain, a deletion in progress); `reboot` through logind (the request is drained);
`complete` the live request (then `delete` it); `delete` a Complete one; `idle`: nothing to do."""

MAX_REASON = 200
"""The most of a request file's text that goes into the maintenance's reason."""


def request_of_boot(
    maintenances: Sequence[Mapping[str, Any]], node: str, boot: str
) -> Mapping[str, Any] | None:
    """This boot's reboot request among `maintenances`: the agent's, of `node` and `boot`, under
    its one name (no other is ever touched)."""
    for nm in maintenances:
        if model.request_node(nm) == node and model.boot_of(nm) == boot:
            return nm
    return None


def next_action(required: bool, request: Mapping[str, Any] | None) -> Action:
    """The next step about this boot's request `request` (None: there is none) while a reboot
    is `required` or not."""
    if request is None:
        return "create" if required else "idle"
    if deleting(request):
        return "wait"  # the controllers' finalizer completes it first; then it is gone
    if spec_stage(request) == "Complete":
        return "delete"
    if not required:
        return "complete"
    return "reboot" if model.is_drained(request) else "wait"


def sentinel_counts(modified: float | None, boot_started: float | None) -> bool:
    """Whether a sentinel file last modified at `modified` (None: there is none) requires a
    reboot in the boot that began at `boot_started` (None: not known: it counts). Both are
    seconds since the epoch; a file modified before the boot began is stale."""
    if modified is None:
        return False
    return boot_started is None or modified >= boot_started


def requested_reason(sources: list[str], text: str = "") -> str:
    """The request maintenance's reason: what requires the reboot (`sources`, in order), and
    the request file's own text (one line, cut short) when it holds one."""
    what = ", ".join(sources) if sources else "a reboot asked for"
    line = " ".join(text.split())
    if len(line) > MAX_REASON:
        line = line[: MAX_REASON - 3] + "..."
    return f"Reboot required ({what}): {line}" if line else f"Reboot required ({what})"
