"""Never two evictionrequest controllers (eviction.lifecycleController), on both backends:
where kube-controller-manager runs lifecycle.k8s.io's own (its ServiceAccount
kube-system/evictionrequest-controller exists), nodeagent's leader runs neither that controller
nor the imperative evictor and only responds. Kubernetes' controller is played by the test, as
upstream's writes it: the Eviction `pod-1-<pod>` and its first status, listing the responders
the pod names. nodeagent's annotate-and-wait interceptor takes its turn on that Eviction (the
point the test waits for), and by then nodeagent has made no Eviction of its own, refused none
as a duplicate and written nothing to the request (no fight)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.config import Config, EvictionConfig
from nodeagent.controllers.cluster import ClusterControllers
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists, NotFound
from nodeagent.kube.resources import (
    EVICTIONS,
    PODS,
    SERVICEACCOUNTS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
)
from nodeagent.model import evictionapi
from nodeagent.model.names import IMPERATIVE_RESPONDER
from nodeagent.model.times import format_time, utcnow
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.integration.bridge.realbridge import MOVER
from tests.integration.upstream.common import pinned_pod
from tests.tasks import cancel_and_wait

pytestmark = pytest.mark.lifecycle_api

RESPONDER = f"annotate.nodeagent.io/{MOVER.name}"
REQUESTER = "acme.io/drainer"


async def kubernetes_runs_its_own(admin: KubeClient) -> None:
    namespace, name = evictionapi.KUBERNETES_CONTROLLER
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    with contextlib.suppress(AlreadyExists):
        await admin.create(SERVICEACCOUNTS, body, namespace)


@pytest.fixture(params=["detected", "configured"])
async def leader(request: pytest.FixtureRequest, backend: TestCluster) -> AsyncIterator[KubeClient]:
    """nodeagent's leader with the mover interceptor, told Kubernetes runs the controller by
    the account (auto) or by its configuration; the admin client."""
    await backend.install_crds()
    admin = backend.client(max_workers=8)
    setting = "auto"
    if request.param == "detected":
        await kubernetes_runs_its_own(admin)
    else:
        setting = "kubernetes"
    account = await backend.service_account(CONTROLLERS_ACCOUNT)
    agent = backend.client(account, max_workers=8)
    eviction = EvictionConfig(
        api="upstream", lifecycle_controller=setting, annotate_interceptors=(MOVER,)
    )
    controllers = ClusterControllers(agent, Config(eviction=eviction), CollectorRegistry())
    task = asyncio.create_task(controllers.run())
    try:
        yield admin
    finally:
        await cancel_and_wait([task])
        namespace, name = evictionapi.KUBERNETES_CONTROLLER
        with contextlib.suppress(NotFound):  # the next tests' leaders run their own
            await admin.delete(SERVICEACCOUNTS, name, namespace)


def as_kubernetes_would(pod: Obj, request: Obj) -> tuple[Obj, Obj]:
    """Upstream's new Eviction of ``pod`` for ``request``, and its first status."""
    md, rmd = pod["metadata"], request["metadata"]
    eviction = {
        "apiVersion": "lifecycle.k8s.io/v1alpha1",
        "kind": "Eviction",
        "metadata": {
            "name": f"pod-1-{md['name']}",
            "labels": {
                REQUESTER: "requester",
                RESPONDER: "responder",
                IMPERATIVE_RESPONDER: "responder",
            },
            "ownerReferences": [
                {
                    "apiVersion": "lifecycle.k8s.io/v1alpha1",
                    "kind": "EvictionRequest",
                    "name": rmd["name"],
                    "uid": rmd["uid"],
                }
            ],
        },
        "spec": {"target": {"pod": {"name": md["name"], "uid": md["uid"]}}},
    }
    now = format_time(utcnow())
    awaiting = [
        {
            "type": t,
            "status": "False",
            "reason": "AwaitingEviction",
            "message": "",
            "lastTransitionTime": now,
        }
        for t in ("Failed", "TargetEvicted")
    ]
    status = {
        "observedGeneration": 1,
        "requesters": [{"name": REQUESTER, "intent": "Eviction"}],
        "targetResponders": [
            {"name": RESPONDER, "priority": 10000, "state": "Active"},
            {"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Inactive"},
        ],
        "responders": [{"name": RESPONDER, "startTime": now}, {"name": IMPERATIVE_RESPONDER}],
        "conditions": awaiting,
    }
    return eviction, status


async def test_where_kubernetes_runs_the_controller_nodeagent_only_responds(
    leader: KubeClient,
) -> None:
    admin = leader
    view = ClusterView(admin, (PODS, EVICTIONS, UPSTREAM_EVICTIONREQUESTS))
    await view.start()
    try:
        pod = await pinned_pod(admin, "db-0", "node-1", ((RESPONDER, 10000),), app="db")
        md = pod["metadata"]
        request = await admin.create(
            UPSTREAM_EVICTIONREQUESTS,
            {
                "apiVersion": "lifecycle.k8s.io/v1alpha1",
                "kind": "EvictionRequest",
                "metadata": {"name": "drain-db-0"},
                "spec": {
                    "target": {"pod": {"name": "db-0", "uid": md["uid"]}},
                    "requester": REQUESTER,
                    "intent": "Eviction",
                },
            },
            "default",
        )
        body, status = as_kubernetes_would(pod, request)
        eviction = await admin.create(EVICTIONS, body, "default")
        name = eviction["metadata"]["name"]
        status_body = {"metadata": {"resourceVersion": eviction["metadata"]["resourceVersion"]}}
        await admin.patch_status(EVICTIONS, name, {**status_body, "status": status}, "default")

        def our_turn_taken() -> bool:
            annotations = (view.get(PODS, "db-0", "default") or {}).get("metadata", {})
            annotated = (annotations.get("annotations") or {}).get(MOVER.annotation_key)
            ev = view.get(EVICTIONS, name, "default") or {}
            entries: list[Obj] = (ev.get("status") or {}).get("responders", [])
            entry = next((r for r in entries if r["name"] == RESPONDER), {})
            return annotated == MOVER.annotation_value and bool(entry.get("heartbeatTime"))

        await view.until(our_turn_taken, 30)
        of_pod = [e for e in view.list(EVICTIONS) if e["spec"]["target"]["pod"]["uid"] == md["uid"]]
        assert [e["metadata"]["name"] for e in of_pod] == [name]  # none of nodeagent's
        held = of_pod[0]["status"]
        assert {c["reason"] for c in held["conditions"]} == {"AwaitingEviction"}  # not refused
        assert held["targetResponders"] == status["targetResponders"]
        assert not (view.get(UPSTREAM_EVICTIONREQUESTS, "drain-db-0", "default") or {}).get(
            "status"
        )  # nothing of nodeagent's controller mirrored
    finally:
        await view.stop()
