"""The simulated cluster's actors: in-process controllers that subscribe to the store.

Each has `__init__(store, ...)` and `async run()`, which runs until cancelled.
"""

from __future__ import annotations

from typing import Any

from nodeagent_testbed.sim.actors.base import Controller
from nodeagent_testbed.sim.actors.daemonset import DaemonSetController
from nodeagent_testbed.sim.actors.deployment import DeploymentController
from nodeagent_testbed.sim.actors.disruption import DisruptionController
from nodeagent_testbed.sim.actors.gc import GarbageCollector
from nodeagent_testbed.sim.actors.kubelet import Kubelet
from nodeagent_testbed.sim.actors.replicaset import ReplicaSetController
from nodeagent_testbed.sim.actors.scheduler import Scheduler
from nodeagent_testbed.sim.actors.statefulset import StatefulSetController
from nodeagent_testbed.sim.store import Store

__all__ = [
    "Controller",
    "DaemonSetController",
    "DeploymentController",
    "DisruptionController",
    "GarbageCollector",
    "Kubelet",
    "ReplicaSetController",
    "Scheduler",
    "StatefulSetController",
    "build_actors",
]


def build_actors(store: Store) -> list[Controller[Any]]:
    """The control plane's actors (kubelets are per node and built separately)."""
    return [
        Scheduler(store),
        DeploymentController(store),
        ReplicaSetController(store),
        StatefulSetController(store),
        DaemonSetController(store),
        GarbageCollector(store),
        DisruptionController(store),
    ]
