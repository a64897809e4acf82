"""`eviction.api`: which EvictionRequest API nodeagent uses, one meaning for the controllers
and the node agents."""

from __future__ import annotations

__all__ = ["AUTO", "EVICTION_APIS", "NODEAGENT", "UPSTREAM", "asks_server", "insists"]

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
