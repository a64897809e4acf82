"""Which Node this agent runs on: configuration, NODE_NAME, host name, then interface addresses."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterable, Mapping
from typing import Any

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import NODES

log = logging.getLogger(__name__)


class IdentityError(RuntimeError):
    pass


def local_addresses() -> set[str]:
    """Every address on this host's interfaces (pyroute2, netlink)."""
    from pyroute2 import IPRoute  # imported here: netlink is only needed for this fallback

    with IPRoute() as ipr:
        return {
            str(dict(a["attrs"]).get("IFA_ADDRESS"))
            for a in ipr.get_addr()
            if dict(a["attrs"]).get("IFA_ADDRESS")
        }


def match_by_address(nodes: Iterable[Mapping[str, Any]], addresses: set[str]) -> list[str]:
    """Nodes whose status.addresses include one of ours (loopback never identifies a node)."""
    ours = {a for a in addresses if not a.startswith("127.") and a != "::1"}
    out = []
    for n in nodes:
        for a in (n.get("status") or {}).get("addresses") or []:
            if a.get("type") in ("InternalIP", "ExternalIP") and a.get("address") in ours:
                out.append(str(n["metadata"]["name"]))
                break
    return out


async def resolve_node_name(
    configured: str | None, env: Mapping[str, str], client: KubeClient
) -> tuple[str, str]:
    """(node name, how it was found). The configured name and NODE_NAME are trusted as given;
    the host name must name an existing Node; else our interface addresses must match
    exactly one Node."""
    if configured:
        return configured, "configuration"
    if env.get("NODE_NAME"):
        return env["NODE_NAME"], "NODE_NAME"
    for host in dict.fromkeys([socket.gethostname(), socket.gethostname().split(".")[0]]):
        try:
            await client.get(NODES, host.lower())
            return host.lower(), "host name"
        except NotFound:
            continue
    addresses = await asyncio.to_thread(local_addresses)
    nodes = (await client.list(NODES))["items"]
    matches = match_by_address(nodes, addresses)
    if len(matches) == 1:
        return matches[0], "interface address"
    if not matches:
        raise IdentityError(
            "cannot tell which Node this is: set nodeName in the configuration or NODE_NAME "
            f"(host name {socket.gethostname()!r} is no Node, and no Node lists one of the "
            f"addresses {sorted(addresses)})"
        )
    raise IdentityError(
        f"several Nodes list this host's addresses ({', '.join(matches)}): set nodeName"
    )
