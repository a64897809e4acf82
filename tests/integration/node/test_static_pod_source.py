"""Node-1's static pod file source on both backends: the simulated kubelet, or on the real
backend tests.clusters.MirrorPods with kwok. The static-pod interceptor's tests rely on both
acting as the kubelet does (mirror pods follow the manifest directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeagent.kube.resources import NODES, PODS, Obj
from tests.clusters import ClusterView, TestCluster
from tests.simutil import running

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  annotations:
    sim.nodeagent.io/exit-seconds: "0.3"
spec:
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 30
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6
"""


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """node-1's static pod directory, with etcd's manifest before the kubelet starts."""
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "etcd.yaml").write_text(MANIFEST)
    return d


async def test_mirror_pods_follow_the_manifest_directory(
    backend: TestCluster, manifests: Path
) -> None:
    kube = backend.client()
    view = ClusterView(kube, [PODS, NODES])
    seen: list[tuple[str, str]] = []  # (event, uid) of etcd's mirror pod, in order
    view.listen(
        lambda kind, _r, o: (
            seen.append((kind, o["metadata"]["uid"]))
            if o["metadata"]["name"] == "etcd-node-1"
            else None
        )
    )
    await view.start()

    def mirror() -> Obj | None:
        return view.get(PODS, "etcd-node-1", "kube-system")

    def running_mirror(other_than: str = "") -> bool:
        p = mirror()
        return p is not None and running(p) and p["metadata"]["uid"] != other_than

    try:
        await view.until(running_mirror)
        p = mirror()
        assert p is not None
        ann = p["metadata"]["annotations"]
        assert ann["kubernetes.io/config.source"] == "file"
        assert ann["kubernetes.io/config.mirror"] == ann["kubernetes.io/config.hash"]
        node = view.get(NODES, "node-1")
        assert node is not None
        assert p["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": "node-1",
                "uid": node["metadata"]["uid"],
                "controller": True,
            }
        ]
        assert p["spec"]["nodeName"] == "node-1" and p["spec"]["priority"] == 2000001000

        # the manifest goes: the mirror pod terminates gracefully with its static pod
        first = p["metadata"]["uid"]
        (manifests / "etcd.yaml").rename(manifests / "etcd.yaml.disabled")
        await view.until(
            lambda: bool((mirror() or {}).get("metadata", {}).get("deletionTimestamp"))
        )
        await view.until(lambda: mirror() is None)
        # back again: a new mirror pod
        (manifests / "etcd.yaml.disabled").rename(manifests / "etcd.yaml")
        await view.until(lambda: running_mirror(other_than=first))

        # a changed manifest: the new mirror pod comes once the old one is gone
        back = mirror()
        assert back is not None
        second = back["metadata"]["uid"]
        (manifests / "etcd.yaml").write_text(MANIFEST.replace("etcd:3.6", "etcd:3.7"))
        await view.until(lambda: running_mirror(other_than=second))
        third = mirror()
        assert third is not None
        assert third["spec"]["containers"][0]["image"].endswith("etcd:3.7")
        assert seen.index(("DELETED", second)) < seen.index(("ADDED", third["metadata"]["uid"]))

        # a mirror pod deleted through the API while its manifest stays comes back
        await kube.delete(PODS, "etcd-node-1", "kube-system")
        await view.until(lambda: running_mirror(other_than=third["metadata"]["uid"]))
    finally:
        await view.stop()
