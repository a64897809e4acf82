"""Helpers for tests on the simulated cluster."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

import nodeagent
from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.store import Obj, Store
from tests.until import until as wait_until


@contextlib.contextmanager
def store_changes(store: Store) -> Iterator[asyncio.Event]:
    """An event set on every change `store` commits, while the block runs."""
    changed = asyncio.Event()

    def wake(_: object) -> None:
        changed.set()

    store.listeners.append(wake)
    try:
        yield changed
    finally:
        store.listeners.remove(wake)


async def until(sim: SimCluster, cond: Callable[[], bool], timeout: float = 20) -> None:
    """`tests.until.until`, re-checking on every change the store commits (no polling)."""
    with store_changes(sim.store) as changed:
        await wait_until(cond, changed=changed, timeout=timeout)


def pods(sim: SimCluster, namespace: str = "default", **labels: str) -> list[Obj]:
    out = []
    for p in sim.store.list(sim.store.resource("", "v1", "pods"), namespace):
        have = p["metadata"].get("labels") or {}
        if all(have.get(k) == v for k, v in labels.items()):
            out.append(p)
    return out


def running(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get(
        "deletionTimestamp"
    )


CRD_DIR = Path(nodeagent.__file__).parent / "manifests" / "crds"


def install_crds(sim: SimCluster) -> None:
    """Register nodeagent's CRDs on the simulated cluster, as `kubectl apply` would."""
    crds = sim.store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for f in sorted(CRD_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                sim.store.create(crds, None, doc)
