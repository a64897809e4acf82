"""The NodeMaintenance controller (KEP-4212, DESIGN 2.1).

The pure decision is :mod:`nodeagent.model.nodemaintenance`; `controller.NodeMaintenanceController`
is the shell, `writes` what it writes and expects the informers to bring back, `signatures`
what it reads of the watched objects, `membership` which maintenances share nodes.
"""

from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.model.names import CORDONED_BY_ANNOTATION, FINALIZER, NODE_LABEL, REQUESTER

__all__ = [
    "CORDONED_BY_ANNOTATION",
    "FINALIZER",
    "NODE_LABEL",
    "REQUESTER",
    "NodeMaintenanceController",
]
