"""Whether nodeagent runs lifecycle.k8s.io's evictionrequest controller and imperative evictor
on this cluster, or kube-controller-manager does (`eviction.lifecycleController`): never both.
Asked once per leader term and once per bridge start, as `eviction.api` is."""

from __future__ import annotations

import logging

from nodeagent.kube.errors import Forbidden, NotFound
from nodeagent.kube.protocols import Getter
from nodeagent.kube.resources import SERVICEACCOUNTS
from nodeagent.model import evictionapi

__all__ = ["runs_lifecycle_here"]

log = logging.getLogger(__name__)


async def runs_lifecycle_here(client: Getter, setting: str) -> bool:
    """True: nodeagent runs them; False: Kubernetes does, nodeagent requests and responds.
    `auto` looks for the ServiceAccount kube-controller-manager runs its own with; one the
    controllers may not read is said once and taken for absent (v1.37 ships no such
    controller)."""
    kubernetes = False
    if setting == evictionapi.AUTO:
        namespace, name = evictionapi.KUBERNETES_CONTROLLER
        try:
            await client.get(SERVICEACCOUNTS, name, namespace)
            kubernetes = True
        except NotFound:
            pass
        except Forbidden:
            log.warning(
                "eviction.lifecycleController is auto, but the controllers may not read "
                "ServiceAccount %s/%s (packaging/kubernetes grants it): taking it that "
                "kube-controller-manager does not run lifecycle.k8s.io's controller; set "
                "eviction.lifecycleController: kubernetes where it does",
                namespace,
                name,
            )
    return evictionapi.runs_lifecycle_controllers(setting, kubernetes)
