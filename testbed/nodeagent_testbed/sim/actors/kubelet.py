"""A simulated kubelet: registers its Node, runs the pods bound to it, finishes their graceful
deletion, and mirrors the manifests of a real static pod directory into the API.

Pods start at once (Running and Ready). A pod being deleted stops `sim.nodeagent.io/exit-seconds`
seconds (default 0) after the kubelet saw the deletion, or when its grace period runs out if
that comes first; it then gets a terminal phase (Succeeded, or Failed when it had to be killed)
and is removed. The Node is registered once at start; there are no periodic heartbeats.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from watchfiles import awatch

from nodeagent_testbed.sim.actors.base import (
    Controller,
    Key,
    key_of,
    pod_phase,
    set_condition,
    terminating,
    uid_of,
)
from nodeagent_testbed.sim.actors.staticpods import MIRROR, Manifest, is_mirror, mirror_pod, scan
from nodeagent_testbed.sim.store import Change, Obj, Store, now_iso

log = logging.getLogger(__name__)

EXIT_SECONDS = "sim.nodeagent.io/exit-seconds"
KUBELET_VERSION = "v1.37.0-sim"
# the kubelet re-reads its static pod directory this often even without file events
FILE_CHECK_MS = 20_000
_POD_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
    "PodScheduled",
)


def node_index(name: str) -> int:
    """N of `node-N`; other names get a stable number from their hash."""
    match = re.search(r"(\d+)$", name)
    return int(match.group(1)) if match else zlib.crc32(name.encode()) % 250 + 1


def exit_seconds(pod: Obj) -> float:
    raw = (pod["metadata"].get("annotations") or {}).get(EXIT_SECONDS)
    if raw is None:
        return 0.0
    try:
        return max(0.0, float(raw))
    except ValueError:
        log.warning(
            "pod %s: ignoring %s=%r, not a number", pod["metadata"]["name"], EXIT_SECONDS, raw
        )
        return 0.0


def host_boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()


class KubeletRouter:
    """One store listener for all the kubelets of a cluster, handing each change only to the
    kubelets it can concern: a pod's change to the kubelet of its node (and to the kubelets
    with a static pod directory, which also look at pods by manifest name), a node's change to
    that node's kubelet. With a listener per kubelet, every change made N calls with N nodes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pods_key = store.resource("", "v1", "pods").key
        self._nodes_key = store.resource("", "v1", "nodes").key
        self._by_node: dict[str, list[Kubelet]] = {}
        self._static: list[Kubelet] = []  # see every pod change
        self._count = 0

    def add(self, kubelet: Kubelet) -> None:
        if self._count == 0:
            self.store.listeners.append(self._route)
        self._count += 1
        if kubelet.static_pod_dir is not None:
            self._static.append(kubelet)
        else:
            self._by_node.setdefault(kubelet.node_name, []).append(kubelet)

    def remove(self, kubelet: Kubelet) -> None:
        if kubelet.static_pod_dir is not None:
            self._static.remove(kubelet)
        else:
            self._by_node[kubelet.node_name].remove(kubelet)
        self._count -= 1
        if self._count == 0:
            self.store.listeners.remove(self._route)

    def _route(self, change: Change) -> None:
        _, rkey, _, new = change
        if rkey == self._pods_key:
            # spec.nodeName never changes once set, so the new object tells
            node = (new.get("spec") or {}).get("nodeName")
            for kubelet in self._by_node.get(node, ()) if node else ():
                kubelet._listen(change)
            for kubelet in self._static:
                kubelet._listen(change)
        elif rkey == self._nodes_key:
            for kubelet in self._by_node.get(new["metadata"]["name"], ()):
                kubelet._listen(change)
            for kubelet in self._static:
                kubelet._listen(change)


class Kubelet(Controller[Key]):
    def __init__(
        self,
        store: Store,
        node_name: str,
        static_pod_dir: Path | None = None,
        router: KubeletRouter | None = None,
    ) -> None:
        """`router`: receive the store's changes through it (shared by a cluster's kubelets)
        instead of through a store listener of its own."""
        super().__init__(store)
        self.node_name = node_name
        self.static_pod_dir = static_pod_dir
        self.router = router
        self.pods = store.resource("", "v1", "pods")
        self.nodes = store.resource("", "v1", "nodes")
        self._pods_key, self._nodes_key = self.pods.key, self.nodes.key
        n = node_index(node_name)
        self.host_ip = f"127.{n // 256 % 256}.{n % 256}.1"
        self._pod_net = n % 256
        self._next_ip = 1
        self._manifests: dict[Key, Manifest] = {}
        self._reported: dict[Path, bytes] = {}
        self._deleting_since: dict[str, float] = {}  # pod uid -> when the deletion was seen
        self._stopping: set[str] = set()  # uids of mirror pods whose static pod is stopping

    # --- the node ----------------------------------------------------------------------------

    async def ensure_node(self) -> Obj:
        """Register the Node, or report it Ready again if it exists."""
        node = self.store.find(self.nodes, None, self.node_name)
        if node is None:
            return self.store.create(self.nodes, None, self._node())
        status = self._node()["status"]

        def ready(o: Obj) -> None:
            st = o.setdefault("status", {})
            conditions = st.get("conditions") or []
            for c in status["conditions"]:
                conditions = set_condition(conditions, c, c["lastHeartbeatTime"])
            st.update({**status, "conditions": conditions})

        return self.store.mutate(self.nodes, None, self.node_name, ready, "status")

    def _node(self) -> Obj:
        now = now_iso()
        n = self._pod_net
        resources = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}

        def cond(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
            return {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }

        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {
                    "kubernetes.io/hostname": self.node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                },
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"podCIDR": f"10.{n}.0.0/16", "podCIDRs": [f"10.{n}.0.0/16"]},
            "status": {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "conditions": [
                    cond(
                        "MemoryPressure",
                        "False",
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                    ),
                    cond(
                        "DiskPressure",
                        "False",
                        "KubeletHasNoDiskPressure",
                        "kubelet has no disk pressure",
                    ),
                    cond(
                        "PIDPressure",
                        "False",
                        "KubeletHasSufficientPID",
                        "kubelet has sufficient PID available",
                    ),
                    cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": self.host_ip},
                    {"type": "Hostname", "address": self.node_name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": f"{zlib.crc32(self.node_name.encode()):032x}",
                    "systemUUID": f"{zlib.crc32(self.node_name.encode()):032x}",
                    # as a real kubelet reports it: the kernel's boot id as written; the
                    # simulated nodes run on this host's kernel, as the agents beside them do
                    "bootID": host_boot_id(),
                    "kernelVersion": "6.12.0-sim",
                    "osImage": "nodeagent simulated node",
                    "containerRuntimeVersion": "containerd://2.1.0",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }

    # --- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        await self.ensure_node()
        if self.static_pod_dir is None:
            await super().run()
            return
        self._manifests = await asyncio.to_thread(
            scan, self.static_pod_dir, self.node_name, self._reported
        )
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._watch_manifests(self.static_pod_dir))
            await super().run()

    async def _watch_manifests(self, directory: Path) -> None:
        # the periodic timeout rescans like the kubelet's file check, and covers changes made
        # between the first scan and the start of the watch
        try:
            async for _ in awatch(
                directory,
                watch_filter=None,
                recursive=False,
                rust_timeout=FILE_CHECK_MS,
                yield_on_timeout=True,
            ):
                self._set_manifests(
                    await asyncio.to_thread(scan, directory, self.node_name, self._reported)
                )
        except OSError as e:
            log.error(
                "kubelet %s: cannot watch static pod directory %s: %s", self.node_name, directory, e
            )

    def _set_manifests(self, manifests: dict[Key, Manifest]) -> None:
        old, self._manifests = self._manifests, manifests
        for key in old.keys() | manifests.keys():
            if old.get(key) != manifests.get(key):
                self.queue.add(key)

    def subscribe(self) -> None:
        if self.router is None:
            super().subscribe()
        else:
            self.router.add(self)

    def unsubscribe(self) -> None:
        if self.router is None:
            super().unsubscribe()
        else:
            self.router.remove(self)

    def on_change(self, change: Change) -> None:
        # without a router every kubelet sees every change: keep the common case (another
        # node's pod) cheap
        kind, rkey, _, new = change
        if rkey == self._pods_key:
            # spec.nodeName never changes once set, so the new object tells
            if (new.get("spec") or {}).get("nodeName") != self.node_name and not (
                self._manifests and key_of(new) in self._manifests
            ):
                return
            uid = uid_of(new)
            if kind == "DELETED":
                self._deleting_since.pop(uid, None)
                self._stopping.discard(uid)
            elif terminating(new):
                self._deleting_since.setdefault(uid, time.monotonic())
            self.queue.add(key_of(new))
        elif (
            rkey == self._nodes_key
            and kind != "MODIFIED"
            and new["metadata"]["name"] == self.node_name
        ):
            # the node appeared or went: mirror pods can (or cannot) be created
            for key in self._manifests:
                self.queue.add(key)

    def _mine(self, pod: Obj | None) -> bool:
        return pod is not None and (pod.get("spec") or {}).get("nodeName") == self.node_name

    def initial_keys(self) -> Iterable[Key]:
        keys = {key_of(p) for p in self.store.iter_kind(self.pods) if self._mine(p)}
        return sorted(keys | self._manifests.keys())

    def reconcile(self, key: Key) -> None:
        pod = self.store.find(self.pods, *key)
        if pod is not None and self._mine(pod) and is_mirror(pod):
            pod = self._sync_mirror(key, pod)
        if pod is None:
            manifest = self._manifests.get(key)
            if manifest is not None:
                self._create_mirror(manifest)
            return
        if not self._mine(pod):
            return
        if terminating(pod):
            self._terminate(key, pod)
        elif pod_phase(pod) not in ("Running", "Succeeded", "Failed"):
            self._start(key, pod)

    # --- static pods -------------------------------------------------------------------------

    def _sync_mirror(self, key: Key, pod: Obj) -> Obj | None:
        """Stop a mirror pod whose static pod stopped; replace one deleted through the API."""
        manifest = self._manifests.get(key)
        annotations = pod["metadata"].get("annotations") or {}
        if manifest is None or annotations.get(MIRROR) != manifest.hash:
            # the static pod is stopping (manifest removed or changed): the mirror pod
            # terminates with it, and a new one follows once it is gone
            self._stopping.add(uid_of(pod))
            if not terminating(pod):
                log.info("kubelet %s: static pod %s/%s stopping", self.node_name, *key)
                self.store.delete(self.pods, *key)
            return self.store.find(self.pods, *key)
        if terminating(pod) and uid_of(pod) not in self._stopping:
            # deleted through the API while the static pod runs on: the real kubelet deletes
            # the mirror pod at once and creates it again
            self.store.remove_now(self.pods, *key)
            return self.store.find(self.pods, *key)
        return pod

    def _create_mirror(self, manifest: Manifest) -> None:
        node = self.store.find(self.nodes, None, self.node_name)
        if node is None or terminating(node):
            log.debug("kubelet %s: no node, so no mirror pod for %s", self.node_name, manifest.path)
            return  # queued again when the node appears
        pod = self.store.create(self.pods, manifest.namespace, mirror_pod(manifest, node))
        log.info(
            "kubelet %s: created mirror pod %s/%s for %s",
            self.node_name,
            manifest.namespace,
            pod["metadata"]["name"],
            manifest.path,
        )

    # --- pod lifecycle -----------------------------------------------------------------------

    def _pod_ip(self) -> str:
        n = self._next_ip = self._next_ip % (254 * 254 - 1) + 1
        return f"10.{self._pod_net}.{n // 254}.{n % 254 + 1}"

    def _start(self, key: Key, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        ip = self.host_ip if spec.get("hostNetwork") else self._pod_ip()
        now = now_iso()

        def running(p: Obj) -> None:
            st = p.setdefault("status", {})
            conditions = st.get("conditions") or []
            for type_ in _POD_CONDITIONS:
                conditions = set_condition(
                    conditions, {"type": type_, "status": "True", "lastProbeTime": None}, now
                )
            st.update(
                {
                    "phase": "Running",
                    "conditions": conditions,
                    "hostIP": self.host_ip,
                    "hostIPs": [{"ip": self.host_ip}],
                    "podIP": ip,
                    "podIPs": [{"ip": ip}],
                    "startTime": now,
                    "containerStatuses": [
                        _container_status(p, c, {"running": {"startedAt": now}}, ready=True)
                        for c in spec.get("containers") or []
                    ],
                }
            )
            if spec.get("initContainers"):
                st["initContainerStatuses"] = [
                    _container_status(p, c, _terminated(0, "Completed", now), ready=True)
                    for c in spec["initContainers"]
                ]

        self.store.mutate(self.pods, *key, running, "status")

    def _terminate(self, key: Key, pod: Obj) -> None:
        since = self._deleting_since.setdefault(uid_of(pod), time.monotonic())
        grace = float(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
        wanted = exit_seconds(pod)
        left = since + min(wanted, grace) - time.monotonic()
        if left > 0:
            self.queue.add_after(key, left)
            return
        self._finish(key, pod, killed=wanted > grace)

    def _finish(self, key: Key, pod: Obj, killed: bool) -> None:
        """The containers have stopped: report a terminal phase, then remove the pod."""
        now = now_iso()
        code, reason = (137, "Error") if killed else (0, "Completed")
        spec = pod.get("spec") or {}

        def stopped(p: Obj) -> None:
            st = p.setdefault("status", {})
            conditions = st.get("conditions") or []
            for type_ in ("ContainersReady", "Ready"):
                conditions = set_condition(
                    conditions, {"type": type_, "status": "False", "reason": "PodCompleted"}, now
                )
            st["phase"] = "Failed" if killed else "Succeeded"
            st["conditions"] = conditions
            st["containerStatuses"] = [
                _container_status(p, c, _terminated(code, reason, now), ready=False)
                for c in spec.get("containers") or []
            ]

        log.debug("kubelet %s: pod %s/%s stopped", self.node_name, *key)
        if pod_phase(pod) not in ("Succeeded", "Failed"):
            self.store.mutate(self.pods, *key, stopped, "status")
        self.store.remove_now(self.pods, *key)


def _terminated(code: int, reason: str, now: str) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now}}


def _container_status(
    pod: Obj, c: dict[str, Any], state: dict[str, Any], ready: bool
) -> dict[str, Any]:
    name = c.get("name", "")
    image = c.get("image", "")
    container_id = zlib.crc32(f"{pod['metadata'].get('uid')}/{name}".encode())
    return {
        "name": name,
        "image": image,
        "imageID": f"{image}@sha256:{zlib.crc32(image.encode()):064x}",
        "containerID": f"containerd://{container_id:064x}",
        "ready": ready,
        "started": "running" in state,
        "restartCount": 0,
        "state": state,
        "lastState": {},
    }
