"""Whether the server serves a resource (an alpha API behind a feature gate may be off)."""

from __future__ import annotations

import asyncio
import itertools
import logging

from nodeagent.kube.errors import Forbidden, KubeError, NotFound
from nodeagent.kube.protocols import Lister
from nodeagent.kube.resources import Resource
from nodeagent.model.backoff import JitteredBackoff

__all__ = ["ask_served", "serves"]

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
