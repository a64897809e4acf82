"""`eviction.api`: which EvictionRequest API nodeagent uses, one meaning for the controllers
and the node agents."""

from __future__ import annotations

__all__ = [
    "AUTO",
    "EVICTION_APIS",
    "KUBERNETES",
    "KUBERNETES_CONTROLLER",
    "LIFECYCLE_CONTROLLERS",
    "NODEAGENT",
    "UPSTREAM",
    "asks_server",
    "insists",
    "runs_lifecycle_controllers",
]

AUTO = "auto"
"""The upstream API (lifecycle.k8s.io/v1alpha1) where the server serves it, else our CRD."""
UPSTREAM = "upstream"
"""The upstream API; the controllers wait until the server serves it."""
NODEAGENT = "nodeagent"
"""Our CRD (nodeagent.io) alone: nothing of the upstream API is watched or written."""
EVICTION_APIS = (AUTO, UPSTREAM, NODEAGENT)


def asks_server(setting: str) -> bool:
    """Whether the server is asked if it serves the upstream API (and it is used if so)."""
    return setting != NODEAGENT


def insists(setting: str) -> bool:
    """Whether the controllers wait for the server to serve the upstream API."""
    return setting == UPSTREAM


# `eviction.lifecycleController`: who runs lifecycle.k8s.io's evictionrequest controller and
# imperative evictor, nodeagent or Kubernetes (kube-controller-manager, from v1.38 behind the
# EvictionRequestAPI gate). Never both: two controllers would each make an Eviction of a pod
# and refuse the other's as a duplicate. AUTO and NODEAGENT as for `eviction.api`.
KUBERNETES = "kubernetes"
"""kube-controller-manager runs them: nodeagent requests evictions and responds, no more."""
LIFECYCLE_CONTROLLERS = (AUTO, NODEAGENT, KUBERNETES)
KUBERNETES_CONTROLLER = ("kube-system", "evictionrequest-controller")
"""The ServiceAccount kube-controller-manager makes for its controller of that name as it
starts it (with --use-service-account-credentials, as kubeadm and most distributions run it),
and whose credentials it then writes with: what `auto` looks for."""


def runs_lifecycle_controllers(setting: str, kubernetes_account: bool) -> bool:
    """Whether nodeagent's leader runs the evictionrequest controller and the imperative
    evictor: `kubernetes_account`, whether :data:`KUBERNETES_CONTROLLER` exists."""
    if setting == AUTO:
        return not kubernetes_account
    return setting == NODEAGENT
