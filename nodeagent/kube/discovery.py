"""Whether the server serves a resource (an alpha API behind a feature gate may be off), and
whether nodeagent runs lifecycle.k8s.io's evictionrequest controller and imperative evictor on
this cluster or kube-controller-manager does (`eviction.lifecycleController`): never both.
Both are asked once per leader term and once per bridge start, and handed to every part."""

from __future__ import annotations

import asyncio
import itertools
import logging

from nodeagent.kube.errors import Forbidden, KubeError, NotFound
from nodeagent.kube.protocols import Getter, Lister
from nodeagent.kube.resources import SERVICEACCOUNTS, Resource
from nodeagent.model import evictionapi
from nodeagent.model.backoff import JitteredBackoff

__all__ = ["ask_served", "runs_lifecycle_here", "serves"]

log = logging.getLogger(__name__)

# a label no object carries: the probe lists one page of nothing, at any cluster size
_NOTHING = "nodeagent.io/served-probe=none"


async def serves(client: Lister, resource: Resource) -> bool:
    """True when listing `resource` works, False when the server does not know it (404).
    Other errors (refused, unreachable) raise: they say nothing about what is served."""
    try:
        await client.list(resource, label_selector=_NOTHING, page_size=1)
    except NotFound:
        return False
    return True


async def ask_served(client: Lister, resource: Resource, *, required: str | None = None) -> bool:
    """Whether the server serves `resource`, asked until it answers (with backoff, saying why
    once) rather than guessed; with `required` (why it must be served, for the log) until it
    serves it. Served but not to us (403: our RBAC predates it) counts as not served, said
    once, unless required."""
    backoff = JitteredBackoff(base=1.0, cap=60.0)
    said = False
    for attempt in itertools.count(1):
        try:
            served = await serves(client, resource)
        except Forbidden as exc:
            if required is None:
                log.error("not using %s: %s", resource.api_version, exc)
                return False
            why = f"{required}; listing {resource.plural} is forbidden: {exc}"
        except KubeError as exc:
            why = (
                f"cannot tell whether the server serves {resource.api_version} "
                f"({resource.plural}): {exc}"
            )
        else:
            if served or required is None:
                return served
            why = required
        if not said:
            log.error("%s", why)
            said = True
        await asyncio.sleep(backoff.delay(attempt))
    raise AssertionError("unreachable")


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
