"""node-1's container, prepared but not booted, under the host's real-node lock: what the
`node_container` fixture (tests/realnode/conftest.py) and the bench's GNS figure
(tests/bench/gns.py) share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import yaml

from nodeagent_testbed.controlplane.build import ensure_built
from nodeagent_testbed.nspawn import Container, node_rootfs
from nodeagent_testbed.realnode import images
from nodeagent_testbed.realnode.node import (
    NSPAWN_ARGS,
    NodeSpec,
    one_node_at_a_time,
    prepare,
    prepare_host,
    sweep,
)


@contextlib.asynccontextmanager
async def prepared_node(
    where: Path,
    name: str,
    kubeconfig: Path,
    pki_dir: Path,
    gns: tuple[int, int],
    with_agent_image: bool = False,
) -> AsyncIterator[Container]:
    """The real node `name` in `where`, joined to the control plane of `kubeconfig` (its CA in
    `pki_dir`), its kubelet with Graceful Node Shutdown periods `gns`. One real node on the host
    at a time (its kubelet's ports and cgroups are the host's): the lock is held from before
    the container exists until after the sweep; a leftover on the host is an AssertionError.
    `with_agent_image`: nodeagent's image too (106 MB to import at every boot), for a
    DaemonSet install; pause and busybox always."""
    lock = await asyncio.to_thread(one_node_at_a_time)
    try:
        base = await asyncio.to_thread(node_rootfs)
        archives = await asyncio.to_thread(images.ensure_images)
        archives = [a for a in archives if not a.name.startswith("etcd-")]  # the fleet's
        if not with_agent_image:
            archives = [a for a in archives if not a.name.startswith("nodeagent-")]
        c = await asyncio.to_thread(Container.copy_of_base, where, "nodeagent-realnode", base)
        c.nspawn_args = NSPAWN_ARGS
        kubelet = ensure_built(log=False).path("kubelet")
        doc = yaml.safe_load(await asyncio.to_thread(kubeconfig.read_text))
        server = doc["clusters"][0]["cluster"]["server"]
        spec = NodeSpec(name, server, pki_dir, kubelet, gns)
        await asyncio.to_thread(prepare_host)
        await asyncio.to_thread(prepare, c.rootfs, spec, archives)
        c.path("/var/log/journal").mkdir(parents=True, exist_ok=True)
    except BaseException:
        lock.close()
        raise
    try:
        yield c
    finally:
        await c.stop()
        left = await asyncio.to_thread(sweep)
        lock.close()
        if left:
            raise AssertionError(f"the real node left behind: {left}")
