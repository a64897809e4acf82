"""`nodeagent manifests namespace` and `crds --with-namespace`: the leader's Namespace, for an
agent that has only the CRDs applied; `crds` alone prints what it always printed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nodeagent.cli import main
from nodeagent.config import LeaderConfig
from nodeagent.manifests import crd_stream, namespace_stream

PACKAGED = Path(__file__).parents[2] / "packaging" / "kubernetes" / "namespace.yaml"


def test_the_default_is_leader_namespace_and_the_packaged_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["manifests", "namespace"]) == 0
    (doc,) = yaml.safe_load_all(capsys.readouterr().out)
    packaged = yaml.safe_load(PACKAGED.read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "Namespace")
    assert doc["metadata"]["name"] == LeaderConfig().namespace == packaged["metadata"]["name"]
    # its labels are the packaged ones less the Pod Security ones the DaemonSet needs
    assert doc["metadata"]["labels"].items() <= packaged["metadata"]["labels"].items()
    assert not any(k.startswith("pod-security") for k in doc["metadata"]["labels"])


def test_a_named_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests", "namespace", "team-a"]) == 0
    (doc,) = yaml.safe_load_all(capsys.readouterr().out)
    assert doc["metadata"]["name"] == "team-a"


@pytest.mark.parametrize(
    ("args", "name"),
    [([], None), (["--with-namespace"], "nodeagent-system"), (["--with-namespace", "x"], "x")],
)
def test_crds_with_the_namespace_first(
    capsys: pytest.CaptureFixture[str], args: list[str], name: str | None
) -> None:
    assert main(["manifests", "crds", *args]) == 0
    out = capsys.readouterr().out
    if name is None:
        assert out == crd_stream()
    else:
        assert out == namespace_stream(name) + crd_stream()
        kinds = [d["kind"] for d in yaml.safe_load_all(out)]
        assert kinds == ["Namespace", "CustomResourceDefinition", "CustomResourceDefinition"]
