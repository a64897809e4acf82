"""Reading the manifest directory as the kubelet does; the manifest <-> mirror pod mapping."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from nodeagent.model.staticpods.manifests import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    ScanResult,
    is_manifest_name,
    mirror_pod_name,
)
from nodeagent.node.staticpods.fsops import DirHandle
from nodeagent.node.staticpods.manifestfiles import read_manifest, scan_manifest_dir


def pod_yaml(name: str, namespace: str | None = None) -> str:
    ns = f"\n  namespace: {namespace}" if namespace else ""
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}{ns}\n"
        "spec:\n  containers: [{name: c, image: busybox}]\n"
    )


def scan(d: Path) -> ScanResult:
    with DirHandle(d) as h:
        return scan_manifest_dir(h)


def test_names_the_kubelet_reads() -> None:
    assert is_manifest_name("etcd.yaml")
    assert is_manifest_name("etcd.yml")
    assert is_manifest_name("etcd.json")
    assert not is_manifest_name(".etcd.yaml")
    assert not is_manifest_name("etcd.yaml.bak")
    assert not is_manifest_name("etcd.yaml~")
    assert not is_manifest_name("README")


def test_mirror_pod_name_lowercases_the_node() -> None:
    assert mirror_pod_name("kube-apiserver", "Node-1") == "kube-apiserver-node-1"


def test_scan_reads_yaml_yml_json_and_skips_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(pod_yaml("a"))
    (tmp_path / "b.yml").write_text(pod_yaml("b", "kube-system"))
    (tmp_path / "c.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}})
    )
    (tmp_path / ".hidden.yaml").write_text(pod_yaml("hidden"))
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub").mkdir()
    result = scan(tmp_path)
    assert [m.path.name for m in result.manifests] == ["a.yaml", "b.yml", "c.json"]
    assert result.problems == ()
    by_key = result.by_mirror_key("node-1")
    assert set(by_key) == {
        ("default", "a-node-1"),
        ("kube-system", "b-node-1"),
        ("default", "c-node-1"),
    }
    a = by_key[("default", "a-node-1")]
    assert a.content == pod_yaml("a").encode()
    assert len(a.sha256) == 64


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("metadata: [\n", "not valid YAML or JSON"),
        ("{", "not valid YAML or JSON"),
        ("- 1\n- 2\n", "does not hold a Pod object"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "does not hold a Pod"),
        ("apiVersion: v1\nkind: Pod\nspec: {}\n", "no metadata"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {labels: {a: b}}\n", "no metadata.name"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: ''}\n", "no metadata.name"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: [1]}\n", "namespace"),
        (pod_yaml("a") + "---\n" + pod_yaml("b"), "not valid YAML or JSON"),
    ],
)
def test_bad_manifest_is_reported_by_name_and_others_survive(
    tmp_path: Path, content: str, reason: str
) -> None:
    (tmp_path / "bad.yaml").write_text(content)
    (tmp_path / "good.yaml").write_text(pod_yaml("good"))
    result = scan(tmp_path)
    assert [m.name for m in result.manifests] == ["good"]
    (problem,) = result.problems
    assert problem.path == tmp_path / "bad.yaml"
    assert reason in problem.reason
    assert str(tmp_path / "bad.yaml") in str(problem)
    # the bad file is left alone
    assert (tmp_path / "bad.yaml").read_text() == content


def test_binary_garbage_is_reported(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "good.yaml").write_text(pod_yaml("good"))
    result = scan(tmp_path)
    assert [m.name for m in result.manifests] == ["good"]
    assert result.problems[0].path.name == "bad.yaml"


@pytest.mark.parametrize("nested", [b"[" * 1000 + b"]" * 1000, b"{a: " * 600 + b"1" + b"}" * 600])
def test_a_manifest_nested_too_deeply_is_reported_and_others_survive(
    tmp_path: Path, nested: bytes
) -> None:
    """~1 KB of nesting raised RecursionError out of the scan: no static pod could be stopped."""
    (tmp_path / "deep.yaml").write_bytes(nested)
    (tmp_path / "good.yaml").write_text(pod_yaml("good"))
    result = scan(tmp_path)
    assert [m.name for m in result.manifests] == ["good"]
    assert [p.path.name for p in result.problems] == ["deep.yaml"]


def test_symlink_is_an_error_naming_the_file_and_its_pod(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "real.yaml").write_text(pod_yaml("linked", "kube-system"))
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "linked.yaml").symlink_to(elsewhere / "real.yaml")
    (d / "dangling.yaml").symlink_to(tmp_path / "nowhere.yaml")
    (d / "good.yaml").write_text(pod_yaml("good"))
    result = scan(d)
    assert [m.name for m in result.manifests] == ["good"]
    problems = {p.path.name: p for p in result.problems}
    assert set(problems) == {"linked.yaml", "dangling.yaml"}
    assert "symbolic link" in problems["linked.yaml"].reason
    assert str(elsewhere / "real.yaml") in problems["linked.yaml"].reason
    assert problems["linked.yaml"].pod == ("kube-system", "linked")
    assert result.problem_for("kube-system", "linked") is problems["linked.yaml"]
    assert problems["dangling.yaml"].pod is None
    assert (d / "linked.yaml").is_symlink()


def test_non_regular_files_are_errors_naming_the_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "dir.yaml").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.json"))
    (tmp_path / "good.yaml").write_text(pod_yaml("good"))
    try:
        result = scan(tmp_path)  # must not hang on the FIFO
    finally:
        sock.close()
    assert [m.name for m in result.manifests] == ["good"]
    reasons = {p.path.name: p.reason for p in result.problems}
    assert reasons == {
        "dir.yaml": "is a directory, not a regular file",
        "fifo.yaml": "is a FIFO, not a regular file",
        "sock.json": "is a socket, not a regular file",
    }


def test_too_large_manifest_is_refused(tmp_path: Path) -> None:
    with (tmp_path / "big.yaml").open("wb") as f:
        f.truncate(MAX_MANIFEST_BYTES + 1)
    with DirHandle(tmp_path) as h, pytest.raises(ManifestError, match="larger than"):
        read_manifest(h, "big.yaml")


def test_first_file_wins_for_duplicate_pods(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(pod_yaml("same"))
    (tmp_path / "b.yaml").write_text(pod_yaml("same") + "# other\n")
    result = scan(tmp_path)
    assert result.by_mirror_key("n")[("default", "same-n")].path.name == "a.yaml"


def test_unreadable_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        DirHandle(tmp_path / "missing")
