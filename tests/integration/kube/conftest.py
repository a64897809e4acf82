"""Real KubeClients (official client underneath) talking to either cluster backend."""

from __future__ import annotations

import pytest

from nodeagent.kube.client import KubeClient
from tests.clusters import TestCluster
from tests.requestcount import RequestCounter

__all__ = ["RequestCounter", "kube", "requests"]


@pytest.fixture
def requests() -> RequestCounter:
    return RequestCounter()


@pytest.fixture
def kube(backend: TestCluster) -> KubeClient:
    """The admin's client: what the test does to the cluster."""
    return backend.client(max_workers=4)
