"""Well-known D-Bus names of systemd-logind and the systemd manager."""

from __future__ import annotations

LOGIND_NAME = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
LOGIND_MANAGER = "org.freedesktop.login1.Manager"

SYSTEMD_NAME = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
SYSTEMD_MANAGER = "org.freedesktop.systemd1.Manager"

LOGIND_UNIT = "systemd-logind.service"

# logind refuses new delay locks while the operation they would delay is already running
ERROR_OPERATION_IN_PROGRESS = "org.freedesktop.login1.OperationInProgress"
