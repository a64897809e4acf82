"""The NodeMaintenance controller (KEP-4212, DESIGN 2.1).

`reconcile.decide` is the pure decision; `controller.NodeMaintenanceController` the shell.
"""

from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.controllers.nodemaintenance.reconcile import (
    CORDONED_BY_ANNOTATION,
    FINALIZER,
    NODE_LABEL,
    REQUESTER,
)

__all__ = [
    "CORDONED_BY_ANNOTATION",
    "FINALIZER",
    "NODE_LABEL",
    "REQUESTER",
    "NodeMaintenanceController",
]
