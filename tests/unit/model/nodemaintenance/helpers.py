"""Small NodeMaintenance, Node and pod objects for the tests of the decision's modules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodeagent.model.bodies import NodeMaintenance, as_maintenance
from nodeagent.model.nodemaintenance.inputs import Inputs

Obj = dict[str, Any]
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def node(name: str, *, unschedulable: bool = False, cordoned_by: str | None = None) -> Obj:
    annotations = {} if cordoned_by is None else {"nodeagent.io/cordoned-by": cordoned_by}
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": annotations,
            "resourceVersion": "1",
        },
        "spec": {"unschedulable": True} if unschedulable else {},
    }


def maintenance(name: str, nodes: list[str], stage: str = "Cordon", **spec: Any) -> NodeMaintenance:
    selector = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}
                ]
            }
        ]
    }
    return as_maintenance(
        {
            "metadata": {
                "name": name,
                "creationTimestamp": "2024-05-01T09:00:00Z",
                "resourceVersion": "1",
                "finalizers": ["nodeagent.io/maintenance-completion"],
            },
            "spec": {"nodeSelector": selector, "stage": stage, **spec},
        }
    )


def inputs(me: NodeMaintenance, nodes: list[Obj], *others: NodeMaintenance, **kw: Any) -> Inputs:
    return Inputs(
        maintenance=me,
        maintenances=[me, *others],
        nodes={n["metadata"]["name"]: n for n in nodes},
        pods={},
        eviction_requests={},
        now=T0,
        **kw,
    )
