"""The kubelet.k8s.io interceptor with a real static pod directory, on both cluster backends.

The NodeMaintenance and EvictionRequest controllers are not running here: each test writes,
through the API as the cluster admin, the objects those controllers would (a Drain maintenance
whose drainTargets reach Static, an EvictionRequest whose active interceptor is kubelet.k8s.io).
The interceptor runs as the agent's ServiceAccount (RBAC enforced on the real server). Node-1's
manifests are in place before its kubelet starts (the simulated kubelet, or on the real backend
tests.clusters.MirrorPods with kwok), as on a real node. Every wait is on a change seen through
a watch or on the interceptor's file watch being in place, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import (
    EVENTS,
    EVICTIONREQUESTS,
    EVICTIONS,
    NODEMAINTENANCES,
    PODS,
    Obj,
    format_time,
    parse_time,
)
from nodeagent.model.interceptors.requests import EVICTED
from nodeagent.model.names import IMPERATIVE_RESPONDER, NODE_LABEL, STATIC_POD_RESPONDER
from nodeagent.model.shutdown import shutdown_maintenance
from nodeagent.node.staticpods.interceptor import StaticPodInterceptor
from nodeagent.node.staticpods.restore import restore_after_reboot
from nodeagent.node.staticpods.stash import Stash
from tests.clusters import ClusterView, TestCluster, create_pod

NODE = "node-1"
BOOT = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
INTERCEPTOR = "kubelet.k8s.io"


def manifest(name: str, priority_class: str = "system-node-critical", extra: str = "") -> bytes:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n"
        f"  name: {name}\n  namespace: kube-system\n  labels: {{component: {name}}}\n"
        f"spec:\n  priorityClassName: {priority_class}\n  terminationGracePeriodSeconds: 45\n"
        f"  containers:\n  - name: {name}\n    image: registry.k8s.io/{name}:v1.37.0\n{extra}"
    ).encode()


CONTROL_PLANE = {
    "etcd.yaml": manifest("etcd", extra="# etcd data dir /var/lib/etcd\n"),
    "kube-apiserver.yaml": manifest("kube-apiserver", extra="# " + "flags " * 500 + "\n"),
    "kube-scheduler.yml": manifest("kube-scheduler", "system-cluster-critical"),
}
SLOW = manifest("slow").replace(
    b"  labels: {component: slow}\n",
    b"  labels: {component: slow}\n  annotations: {sim.nodeagent.io/exit-seconds: '30'}\n",
)
BAD = {
    **CONTROL_PLANE,
    "broken.yaml": b"apiVersion: v1\nkind: Pod\nmetadata: [\n",
    "nameless.yaml": b"apiVersion: v1\nkind: Pod\nmetadata: {namespace: kube-system}\n",
}


@pytest.fixture
def manifests(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """node-1's static pod directory (replacing the shared fixture the `backend` takes), filled
    before the backend starts: the control plane's manifests, or the files a test names by
    indirect parametrization."""
    d = tmp_path / "manifests"
    d.mkdir()
    for name, data in getattr(request, "param", CONTROL_PLANE).items():
        (d / name).write_bytes(data)
    return d


@dataclass
class Env:
    kube: KubeClient  # the cluster admin, playing the controllers
    view: ClusterView
    manifests: Path
    stash_dir: Path
    interceptor: StaticPodInterceptor

    # --- what the API server holds, as its watches tell --------------------------------------

    def mirror(self, name: str) -> Obj | None:
        return self.view.get(PODS, f"{name}-{NODE}", "kube-system")

    def pod(self, name: str) -> Obj:
        pod = self.mirror(name)
        assert pod is not None, f"no mirror pod for {name}"
        return pod

    def our_entry(self, evr_name: str) -> dict[str, Any]:
        evr = self.view.get(EVICTIONREQUESTS, evr_name, "kube-system") or {}  # maybe not seen yet
        for entry in (evr.get("status") or {}).get("interceptors") or []:
            if entry["name"] == INTERCEPTOR:
                return dict(entry)
        return {}

    def events(self, reason: str) -> list[Obj]:
        return [e for e in self.view.list(EVENTS) if e.get("reason") == reason]

    async def until(self, cond: Any, timeout: float = 20) -> None:
        await self.view.until(cond, timeout)

    # --- acting through the API, as the controllers would -----------------------------------

    async def maintenance(self, name: str, static_priority: int, *, body: Obj | None = None) -> Obj:
        """A Drain maintenance of node-1 whose drainTargets reached Static <= static_priority."""
        nm = body or {
            "apiVersion": "nodeagent.io/v1alpha1",
            "kind": "NodeMaintenance",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [NODE]}
                            ]
                        }
                    ]
                },
                "stage": "Drain",
                "reason": "kernel upgrade",
            },
        }
        created = await self.kube.create(NODEMAINTENANCES, nm)
        targets = [
            {"podPriority": p, "podType": t}
            for t in ("Default", "DaemonSet")
            for p in (1_000_000_000, 2_000_000_000, 2_000_001_000, 2_147_483_647)
        ] + [{"podPriority": static_priority, "podType": "Static"}]
        status = {
            "nodeStatuses": [
                {"nodeRef": {"name": NODE}, "drainTargets": targets, "drainMessage": "Evacuating"}
            ]
        }
        name = created["metadata"]["name"]
        return await self.kube.patch_status(NODEMAINTENANCES, name, {"status": status})

    async def set_stage(self, name: str, stage: str) -> None:
        await self.kube.patch(NODEMAINTENANCES, name, {"spec": {"stage": stage}})

    async def eviction_request(self, pod: Obj, active: str = INTERCEPTOR) -> str:
        """What the EvictionRequest controller makes for a targeted pod, turn at `active`."""
        meta = pod["metadata"]
        name = str(meta["uid"])
        await self.kube.create(
            EVICTIONREQUESTS,
            {
                "apiVersion": "nodeagent.io/v1alpha1",
                "kind": "EvictionRequest",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": {**(meta.get("labels") or {}), "nodeagent.io/node": NODE},
                },
                "spec": {
                    "target": {"pod": {"name": meta["name"], "uid": meta["uid"]}},
                    "requesters": [{"name": "nodemaintenance.k8s.io"}],
                },
            },
        )
        status = {
            "targetInterceptors": [{"name": INTERCEPTOR}, {"name": "imperative-eviction.k8s.io"}],
            "activeInterceptors": [active],
        }
        await self.kube.patch_status(EVICTIONREQUESTS, name, {"status": status}, meta["namespace"])
        return name

    async def upstream_eviction(self, pod: Obj) -> str:
        """What the controllers make upstream for a targeted mirror pod: an Eviction labelled
        with its node, our static-pod responder Active."""
        meta = pod["metadata"]
        name, namespace = str(meta["uid"]), meta["namespace"]
        body = {
            "apiVersion": "lifecycle.k8s.io/v1alpha1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace, "labels": {NODE_LABEL: NODE}},
            "spec": {"target": {"pod": {"name": meta["name"], "uid": meta["uid"]}}},
        }
        await self.kube.create(EVICTIONS, body, namespace)
        now = format_time(datetime.now(UTC))
        status = {
            "targetResponders": [
                {"name": STATIC_POD_RESPONDER, "priority": 10000, "state": "Active"},
                {"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Inactive"},
            ],
            "responders": [
                {"name": STATIC_POD_RESPONDER, "startTime": now},
                {"name": IMPERATIVE_RESPONDER},
            ],
        }
        await self.kube.patch_status(EVICTIONS, name, {"status": status}, namespace)
        return name

    def responder_entry(self, name: str) -> dict[str, Any]:
        eviction = self.view.get(EVICTIONS, name, "kube-system") or {}
        for entry in (eviction.get("status") or {}).get("responders") or []:
            if entry["name"] == STATIC_POD_RESPONDER:
                return dict(entry)
        return {}

    # --- the directories ----------------------------------------------------------------------

    def in_dir(self) -> dict[str, bytes]:
        """The manifests the kubelet sees (not the stash in the directory, a dot name)."""
        return {
            p.name: p.read_bytes() for p in self.manifests.iterdir() if not p.name.startswith(".")
        }

    def stashed(self) -> dict[str, bytes]:
        with Stash(self.manifests, self.stash_dir) as stash:
            return {s.entry.original_name: s.payload.read_bytes() for s in stash.contents().entries}


@contextlib.asynccontextmanager
async def environment(
    backend: TestCluster,
    manifests: Path,
    *,
    stash_dir: Path | None = None,
    **kw: Any,
) -> AsyncIterator[Env]:
    s = stash_dir or manifests / ".nodeagent-stash"  # the default place
    # a test's heartbeats seconds apart need a CRD that allows them (the shipped one asks 60 s)
    fast = kw.get("heartbeat_interval", 60) < 60
    await backend.install_crds(heartbeat_spacing=0 if fast else None)
    kube = backend.client(max_workers=4)
    # the upstream Evictions where served (the real control plane: the simulated one does not)
    upstream = [EVICTIONS] if backend.kind == "real" else []
    view = ClusterView(kube, [PODS, EVICTIONREQUESTS, NODEMAINTENANCES, EVENTS, *upstream])
    await view.start()
    agent = backend.client(await backend.service_account(node=NODE), max_workers=4)
    informers = SharedInformers(agent)
    interceptor = StaticPodInterceptor(
        agent,
        informers,
        Stash(manifests, s, boot_id=BOOT),
        EventRecorder(agent, host=NODE),
        node_name=NODE,
        boot_id=BOOT,
        **kw,
    )
    env = Env(kube, view, manifests, s, interceptor)

    async def run() -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(informers.run())
            tg.create_task(interceptor.run())
            tg.create_task(mark_evicted(kube, view))

    task = asyncio.create_task(run())
    try:
        async with asyncio.timeout(20):
            await interceptor.watching.wait()
        names = _pod_names(env.in_dir())
        await env.until(lambda: all(env.mirror(n) for n in names))
        yield env
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await view.stop()


async def mark_evicted(kube: KubeClient, view: ClusterView) -> None:
    """The EvictionRequest controller's part the interceptor relies on (node agents read no
    pods): Evicted=True on a request once its pod is gone or replaced by another UID."""
    marked: set[str] = set()

    def due() -> list[Obj]:
        out = []
        for evr in view.list(EVICTIONREQUESTS):
            target = evr["spec"]["target"]["pod"]
            pod = view.get(PODS, target["name"], evr["metadata"]["namespace"])
            gone = pod is None or pod["metadata"]["uid"] != target["uid"]
            if gone and evr["metadata"]["uid"] not in marked:
                out.append(evr)
        return out

    while True:
        await view.until(lambda: bool(due()), timeout=3600)
        for evr in due():
            marked.add(evr["metadata"]["uid"])
            evicted = {
                "type": EVICTED,
                "status": "True",
                "reason": "PodGone",
                "message": "the pod is gone",
                "lastTransitionTime": format_time(datetime.now(UTC)),
            }
            with contextlib.suppress(NotFound):
                await kube.patch_status(
                    EVICTIONREQUESTS,
                    evr["metadata"]["name"],
                    {"status": {"conditions": [evicted]}},
                    evr["metadata"]["namespace"],
                )


def _pod_names(files: dict[str, bytes]) -> list[str]:
    """The static pods of `files` (the valid manifests, named after their files here)."""
    return [n.rsplit(".", 1)[0] for n, data in files.items() if b"\n  name: " in data]


# --- the drain reaches the static pods -----------------------------------------------------


async def test_static_pods_stop_in_turn_stay_down_and_come_back(
    backend: TestCluster, manifests: Path
) -> None:
    async with environment(backend, manifests) as env:
        nm = await env.maintenance("upgrade", static_priority=2_000_001_000)
        evr = await env.eviction_request(env.pod("kube-apiserver"))

        # the manifest leaves the directory, the mirror pod goes, the request completes
        await env.until(lambda: env.mirror("kube-apiserver") is None)
        await env.until(lambda: "completionTime" in env.our_entry(evr))
        assert "kube-apiserver.yaml" not in env.in_dir()
        assert env.stashed() == {"kube-apiserver.yaml": CONTROL_PLANE["kube-apiserver.yaml"]}
        entry = env.our_entry(evr)
        assert entry["startTime"] <= entry["heartbeatTime"]
        assert "gone" in entry["message"]
        await env.until(lambda: bool(env.events("StaticPodStopping")))
        stopping = env.events("StaticPodStopping")
        assert stopping and "kube-apiserver.yaml" in stopping[0]["message"]
        assert stopping[0]["involvedObject"]["name"] == "kube-apiserver-node-1"
        assert env.mirror("etcd") is not None  # nothing else was touched

        # a manifest dropped in while its pod would already be targeted: aside within 1 s
        started = time.monotonic()
        late = manifest("kube-controller-manager")
        (env.manifests / "kube-controller-manager.yaml").write_bytes(late)
        await env.until(lambda: bool(env.events("StaticPodManifestMovedAside")), timeout=5)
        elapsed = time.monotonic() - started
        assert elapsed < 1.0, f"moved aside after {elapsed:.2f}s"
        assert "kube-controller-manager.yaml" not in env.in_dir()
        (event,) = env.events("StaticPodManifestMovedAside")
        assert event["involvedObject"]["kind"] == "NodeMaintenance"
        assert "kube-controller-manager.yaml" in event["message"]

        # the other static pods follow in their turn
        others = [await env.eviction_request(env.pod(name)) for name in ("etcd", "kube-scheduler")]
        await env.until(lambda: all("completionTime" in env.our_entry(o) for o in others))
        assert env.in_dir() == {}
        assert env.stashed() == {**CONTROL_PLANE, "kube-controller-manager.yaml": late}

        # completing the maintenance restores every manifest, byte-identical
        await env.set_stage(nm["metadata"]["name"], "Complete")
        names = [*_pod_names(CONTROL_PLANE), "kube-controller-manager"]
        await env.until(lambda: all(env.mirror(n) for n in names))
        assert env.in_dir() == {**CONTROL_PLANE, "kube-controller-manager.yaml": late}
        assert env.stashed() == {}
        await env.until(lambda: bool(env.events("StaticPodManifestRestored")))


@pytest.mark.backends("real")
async def test_an_upstream_eviction_stops_the_static_pod_in_its_turn(
    backend: TestCluster, manifests: Path
) -> None:
    """Where the server serves lifecycle.k8s.io, the interceptor is the Evictions'
    nodeagent.io/static-pod responder: it moves the manifest aside and says so in its entry
    (the controllers end the Eviction once the mirror pod is gone)."""
    async with environment(backend, manifests) as env:
        nm = await env.maintenance("upgrade", static_priority=2_147_483_647)
        name = await env.upstream_eviction(env.pod("etcd"))
        await env.until(lambda: env.mirror("etcd") is None)
        assert env.stashed() == {"etcd.yaml": CONTROL_PLANE["etcd.yaml"]}
        await env.until(lambda: "moved aside" in env.responder_entry(name).get("message", ""))
        entry = env.responder_entry(name)
        assert entry["heartbeatTime"] and entry["expectedCompletionTime"]
        assert env.mirror("kube-apiserver") is not None  # nothing else was touched
        await env.set_stage(nm["metadata"]["name"], "Complete")
        await env.until(lambda: env.mirror("etcd") is not None)
        assert env.in_dir() == CONTROL_PLANE


@pytest.mark.backends("real")
async def test_with_eviction_api_nodeagent_upstream_evictions_are_left_alone(
    backend: TestCluster, manifests: Path
) -> None:
    """`eviction.api: nodeagent` on the node as the controllers read it: the server serves
    lifecycle.k8s.io, yet the node's upstream Evictions get no response (the manifest stays),
    while our CRD's requests are served as ever (the node side asked the server regardless)."""
    async with environment(backend, manifests, eviction_api="nodeagent") as env:
        nm = await env.maintenance("upgrade", static_priority=2_147_483_647)
        name = await env.upstream_eviction(env.pod("etcd"))
        await env.eviction_request(env.pod("kube-apiserver"))
        await env.until(lambda: env.mirror("kube-apiserver") is None)
        assert env.mirror("etcd") is not None
        assert "etcd.yaml" not in env.stashed()
        # the entry as the controllers made it Active: nothing of the interceptor's
        assert set(env.responder_entry(name)) == {"name", "startTime"}
        await env.set_stage(nm["metadata"]["name"], "Complete")
        await env.until(lambda: env.mirror("kube-apiserver") is not None)


async def test_deleting_the_maintenance_restores(backend: TestCluster, manifests: Path) -> None:
    async with environment(backend, manifests) as env:
        await env.maintenance("gone-soon", static_priority=2_147_483_647)
        evr = await env.eviction_request(env.pod("etcd"))
        await env.until(lambda: "completionTime" in env.our_entry(evr))
        assert "etcd.yaml" in env.stashed()
        await env.kube.delete(NODEMAINTENANCES, "gone-soon")
        await env.until(lambda: env.mirror("etcd") is not None)
        assert env.in_dir() == CONTROL_PLANE


@pytest.mark.parametrize("manifests", [{"slow.yaml": SLOW}], indirect=True, ids=["slow"])
async def test_heartbeat_and_expected_finish_while_the_pod_stops(
    backend: TestCluster, manifests: Path
) -> None:
    async with environment(backend, manifests, heartbeat_interval=0.5) as env:
        await env.maintenance("m", static_priority=2_147_483_647)
        evr = await env.eviction_request(env.pod("slow"))
        await env.until(lambda: bool(env.our_entry(evr)))
        first = env.our_entry(evr)
        assert "moved aside" in first["message"] and "waiting for the kubelet" in first["message"]
        assert "completionTime" not in first
        start = first["startTime"]
        # expectedFinishTime: the pod's grace period (45 s) after the start
        expected, started = parse_time(first["expectedFinishTime"]), parse_time(start)
        assert expected is not None and started is not None
        finish = expected - started
        assert finish.total_seconds() == 45
        # heartbeats go on, startTime stays
        await env.until(
            lambda: env.our_entry(evr).get("heartbeatTime", "") > first["heartbeatTime"],
            timeout=10,
        )
        assert env.our_entry(evr)["startTime"] == start
        assert env.mirror("slow") is not None  # still stopping


# --- declining ------------------------------------------------------------------------------------


async def test_declines_a_static_pod_that_is_not_targeted_yet(
    backend: TestCluster, manifests: Path
) -> None:
    async with environment(backend, manifests) as env:
        # the drain has reached Static pods up to 2000000000 only: the scheduler (2000000000)
        # is targeted, the apiserver (2000001000) is not
        await env.maintenance("m", static_priority=2_000_000_000)
        evr = await env.eviction_request(env.pod("kube-apiserver"))
        await env.until(lambda: "completionTime" in env.our_entry(evr))
        message = env.our_entry(evr)["message"]
        assert message.startswith("declined: no NodeMaintenance drain target")
        assert "priority 2000001000" in message and "Static<=2000000000" in message
        assert env.in_dir() == CONTROL_PLANE
        assert env.mirror("kube-apiserver") is not None
        await env.until(lambda: bool(env.events("StaticPodEvictionDeclined")))


async def test_declines_without_any_maintenance(backend: TestCluster, manifests: Path) -> None:
    async with environment(backend, manifests) as env:
        evr = await env.eviction_request(env.pod("etcd"))
        await env.until(lambda: "completionTime" in env.our_entry(evr))
        assert env.our_entry(evr)["message"].startswith("declined")
        assert env.in_dir() == CONTROL_PLANE


async def test_declines_a_pod_that_is_not_static(backend: TestCluster, manifests: Path) -> None:
    async with environment(backend, manifests) as env:
        await env.maintenance("m", static_priority=2_147_483_647)
        pod = await create_pod(
            env.kube,
            {
                "metadata": {"name": "plain", "namespace": "kube-system"},
                "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
            },
        )
        evr = await env.eviction_request(pod)
        await env.until(lambda: "completionTime" in env.our_entry(evr))
        assert "not a static (mirror) pod" in env.our_entry(evr)["message"]


async def test_leaves_requests_alone_when_another_interceptor_is_active(
    backend: TestCluster, manifests: Path
) -> None:
    async with environment(backend, manifests) as env:
        await env.maintenance("m", static_priority=2_147_483_647)
        evr = await env.eviction_request(env.pod("etcd"), active="mover.example.com")
        # a later request that is ours shows the worker has passed the first one
        ours = await env.eviction_request(env.pod("kube-scheduler"))
        await env.until(lambda: "completionTime" in env.our_entry(ours))
        assert env.our_entry(evr) == {}
        assert "etcd.yaml" in env.in_dir()


# --- across reboots -------------------------------------------------------------------------------


async def test_shutdown_maintenance_of_an_earlier_boot_holds_nothing(
    backend: TestCluster, manifests: Path
) -> None:
    """Manifests a shutdown maintenance of the previous boot moved aside are restored at
    start-up (restore_after_reboot, before the kubelet); that maintenance may still be in
    stage Drain in the API, but it does not make the interceptor stop them again. This boot's
    shutdown maintenance does hold the node."""
    async with environment(backend, manifests) as env:
        old_boot = "00000000-0000-0000-0000-000000000001"
        old = shutdown_maintenance(NODE, old_boot, "reboot")
        await env.maintenance("", 2_147_483_647, body=old)
        evr = await env.eviction_request(env.pod("etcd"))
        await env.until(lambda: "completionTime" in env.our_entry(evr))
        assert env.our_entry(evr)["message"].startswith("declined")
        assert env.in_dir() == CONTROL_PLANE

        this = shutdown_maintenance(NODE, BOOT, "reboot")
        now = await env.maintenance("", 2_147_483_647, body=this)
        evr2 = await env.eviction_request(env.pod("kube-scheduler"))
        await env.until(lambda: env.mirror("kube-scheduler") is None)
        await env.until(lambda: "completionTime" in env.our_entry(evr2))
        with Stash(env.manifests, env.stash_dir) as stash:
            (item,) = stash.contents().entries
        assert item.entry.shutdown and item.entry.boot_id == BOOT
        assert item.entry.maintenance == now["metadata"]["name"]

    # the next boot, before the kubelet starts: back in place, byte-identical
    report = restore_after_reboot(env.manifests, env.stash_dir, boot_id="next-boot")
    assert [r.outcome for r in report.results] == ["restored"]
    assert env.in_dir() == CONTROL_PLANE


# --- bad inputs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("manifests", [BAD], indirect=True, ids=["bad"])
async def test_bad_manifests_are_reported_and_do_not_stop_the_others(
    backend: TestCluster, manifests: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_bytes(manifest("linked"))
    async with environment(backend, manifests) as env:
        (env.manifests / "linked.yaml").symlink_to(elsewhere)
        os.mkfifo(env.manifests / "fifo.yaml")
        await env.until(lambda: env.mirror("linked") is not None)
        await env.maintenance("m", static_priority=2_147_483_647)
        await env.until(lambda: len(env.events("StaticPodManifestInvalid")) >= 4)
        messages = sorted(e["message"] for e in env.events("StaticPodManifestInvalid"))
        assert any("broken.yaml: not valid YAML" in m for m in messages)
        assert any("nameless.yaml: the pod has no metadata.name" in m for m in messages)
        assert any("linked.yaml: is a symbolic link" in m for m in messages)
        assert any("fifo.yaml: is a FIFO" in m for m in messages)

        # the symlinked static pod cannot be stopped: the request says why, naming the file
        linked = await env.eviction_request(env.pod("linked"))
        await env.until(lambda: "linked.yaml" in env.our_entry(linked).get("message", ""))
        entry = env.our_entry(linked)
        assert "symbolic link" in entry["message"] and "completionTime" not in entry
        assert (env.manifests / "linked.yaml").is_symlink()
        # and every other manifest is handled as usual
        etcd = await env.eviction_request(env.pod("etcd"))
        await env.until(lambda: "completionTime" in env.our_entry(etcd))
        assert "etcd.yaml" in env.stashed()
        for name in ("broken.yaml", "nameless.yaml"):
            assert (env.manifests / name).read_bytes() == BAD[name]


async def _mount(*args: str) -> bool:
    proc = await asyncio.create_subprocess_exec(
        "mount", *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    return await proc.wait() == 0


async def test_read_only_stash_is_reported_and_moves_nothing(
    backend: TestCluster, manifests: Path, tmp_path: Path
) -> None:
    s = tmp_path / "stash"
    s.mkdir()
    if os.geteuid() != 0 or not await _mount("--bind", "-o", "ro", str(s), str(s)):
        pytest.skip("cannot make a read-only bind mount here")
    try:
        async with environment(backend, manifests, stash_dir=s) as env:
            await env.maintenance("m", static_priority=2_147_483_647)
            evr = await env.eviction_request(env.pod("etcd"))
            await env.until(lambda: "not writable" in env.our_entry(evr).get("message", ""))
            assert f"stash directory {s} is not writable" in env.our_entry(evr)["message"]
            assert "completionTime" not in env.our_entry(evr)
            await env.until(lambda: bool(env.events("StaticPodStashUnavailable")))
            assert env.in_dir() == CONTROL_PLANE
            assert list(s.iterdir()) == []
    finally:
        umount = await asyncio.create_subprocess_exec("umount", str(s))
        assert await umount.wait() == 0
