"""Whether the server serves a resource (an alpha API behind a feature gate may be off)."""

from __future__ import annotations

from nodeagent.kube.errors import NotFound
from nodeagent.kube.protocols import Lister
from nodeagent.kube.resources import Resource

__all__ = ["serves"]

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
