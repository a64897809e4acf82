"""systemd-logind over D-Bus: the only package that imports dbus-next.

- `bus`: a connection (system bus or a given address) with fd passing and disconnect detection
- `inhibitor`: `Inhibit()` and `InhibitorLock`, the fd that is the lock
- `manager`: `Logind`, shutdown signals (with metadata where logind has it) and properties
- `dropin`: the `InhibitDelayMaxSec` drop-in, logind reload, read-back and diagnosis
- `guard`: `ShutdownGuard`, the long-running loop that hands shutdowns to a `ShutdownHandler`

Decisions about when a shutdown may proceed live in `nodeagent.node.shutdown`, not here.
"""

from nodeagent.logind.bus import Bus, BusClosed, BusError, CallFailed
from nodeagent.logind.dropin import DropinFile, DropinResult, ensure_dropin, render_dropin
from nodeagent.logind.guard import DEFAULT_WHY, ShutdownGuard, ShutdownHandler
from nodeagent.logind.inhibitor import InhibitorLock, take_inhibitor
from nodeagent.logind.manager import (
    KIND_UNKNOWN,
    SHUTDOWN_KINDS,
    InhibitorInfo,
    Logind,
    LogindFeatures,
    LogindUnavailable,
    ShutdownSignal,
)

__all__ = [
    "DEFAULT_WHY",
    "KIND_UNKNOWN",
    "SHUTDOWN_KINDS",
    "Bus",
    "BusClosed",
    "BusError",
    "CallFailed",
    "DropinFile",
    "DropinResult",
    "InhibitorInfo",
    "InhibitorLock",
    "Logind",
    "LogindFeatures",
    "LogindUnavailable",
    "ShutdownGuard",
    "ShutdownHandler",
    "ShutdownSignal",
    "ensure_dropin",
    "render_dropin",
    "take_inhibitor",
]
