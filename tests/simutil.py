"""Helpers for tests on the simulated cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import yaml

import nodeagent
from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.store import Obj


async def until(sim: SimCluster, cond: Callable[[], bool], timeout: float = 20) -> None:
    """Wait until `cond` holds, re-checking on every change the store commits (no polling)."""
    changed = asyncio.Event()

    def wake(_: object) -> None:
        changed.set()

    sim.store.listeners.append(wake)
    try:
        async with asyncio.timeout(timeout):
            while not cond():
                changed.clear()
                await changed.wait()
    finally:
        sim.store.listeners.remove(wake)


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
