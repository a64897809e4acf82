"""Reading a static pod directory as the kubelet does, and the mirror pods made from it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from nodeagent_testbed.sim.actors.staticpods import (
    HASH,
    MIRROR,
    SOURCE,
    ManifestError,
    is_mirror,
    mirror_pod,
    parse_manifest,
    scan,
)

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: api}
spec:
  priorityClassName: system-cluster-critical
  containers: [{name: api, image: kube-apiserver}]
status: {phase: Running}
"""

NODE = {"metadata": {"name": "node-1", "uid": "node-uid"}}


def test_parse_yaml_and_json() -> None:
    m = parse_manifest(POD.encode(), "node-1", Path("api.yaml"))
    assert m.pod["metadata"] == {"name": "api", "namespace": "default"}
    assert len(m.hash) == 32
    j = parse_manifest(json.dumps(m.pod).encode(), "node-1", Path("api.json"))
    assert j.pod["metadata"]["name"] == "api"


def test_hash_depends_on_content_and_node() -> None:
    a = parse_manifest(POD.encode(), "node-1", Path("a.yaml")).hash
    assert a == parse_manifest(POD.encode(), "node-1", Path("b.yaml")).hash
    assert a != parse_manifest(POD.encode(), "node-2", Path("a.yaml")).hash
    assert (
        a
        != parse_manifest(
            POD.replace("image: kube-apiserver", "image: v2").encode(), "node-1", Path("a")
        ).hash
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "does not hold an object"),
        ("- a\n- b\n", "does not hold an object"),
        ("metadata: [\n", "not YAML or JSON"),
        (POD + "---\n" + POD, "not YAML or JSON"),  # one pod per file
        (POD.replace("kind: Pod", "kind: Deployment"), "want apiVersion v1 kind Pod"),
        (POD.replace("metadata: {name: api}", "metadata: {}"), "metadata.name"),
        (POD.replace("image: kube-apiserver", "image: ''"), "spec.containers"),
    ],
)
def test_invalid_manifests(content: str, problem: str) -> None:
    with pytest.raises(ManifestError, match=problem):
        parse_manifest(content.encode(), "node-1", Path("x.yaml"))


def test_scan_reads_only_manifests(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "api.yaml").write_text(POD)
    (tmp_path / "api2.yml").write_text(POD.replace("name: api}", "name: api2, namespace: ns}"))
    (tmp_path / ".api3.yaml").write_text(POD.replace("name: api}", "name: api3}"))
    (tmp_path / "api4.yaml.bak").write_text(POD.replace("name: api}", "name: api4}"))
    (tmp_path / "sub.yaml").mkdir()
    (tmp_path / "zz-duplicate.json").write_text(
        json.dumps({**parse_manifest(POD.encode(), "n", Path()).pod, "metadata": {"name": "api"}})
    )
    (tmp_path / "broken.yaml").write_text("kind: [")
    reported: dict[Path, bytes] = {}
    with caplog.at_level(logging.WARNING):
        found = scan(tmp_path, "node-1", reported)
    assert sorted(found) == [("default", "api-node-1"), ("ns", "api2-node-1")]
    assert found[("default", "api-node-1")].path == tmp_path / "api.yaml"
    assert "broken.yaml" in caplog.text and "already defined" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        scan(tmp_path, "node-1", reported)
    assert "broken.yaml" not in caplog.text  # reported once per content


def test_scan_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    assert scan(tmp_path / "nope", "node-1", {}) == {}


def test_mirror_pod() -> None:
    m = parse_manifest(POD.encode(), "Node-1", Path("api.yaml"))
    pod = mirror_pod(m, {"metadata": {"name": "Node-1", "uid": "u"}})
    assert pod["metadata"]["name"] == "api-node-1"
    ann = pod["metadata"]["annotations"]
    assert ann[MIRROR] == ann[HASH] == m.hash and ann[SOURCE] == "file"
    assert pod["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "Node-1", "uid": "u", "controller": True}
    ]
    assert pod["spec"]["nodeName"] == "Node-1"
    assert pod["spec"]["priority"] == 2000000000
    assert "status" not in pod
    assert is_mirror(pod)
    assert "annotations" not in m.pod["metadata"]  # the manifest is left alone


def test_mirror_pod_keeps_an_explicit_priority() -> None:
    m = parse_manifest(
        POD.replace("priorityClassName: system-cluster-critical", "priority: 7").encode(),
        "node-1",
        Path("api.yaml"),
    )
    assert mirror_pod(m, NODE)["spec"]["priority"] == 7
