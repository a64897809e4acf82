"""Manifests shipped inside the package (package data under ``nodeagent/manifests/``).

The CustomResourceDefinitions of DESIGN section 2 live in ``nodeagent/manifests/crds/*.yaml``;
``packaging/kubernetes/crds/`` links to the same files. ``nodeagent manifests crds`` prints them.
``nodeagent manifests namespace`` prints the Namespace the agents elect their leader in.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from nodeagent.config import LeaderConfig
from nodeagent.model.names import AGENT, LABEL_NAME

__all__ = [
    "CRD_FILES",
    "LEADER_NAMESPACE",
    "crd_documents",
    "crd_stream",
    "crd_texts",
    "namespace_document",
    "namespace_stream",
]

CRD_FILES = ("nodemaintenances.yaml", "evictionrequests.yaml")
"""The CRD manifests, in the order they are printed and installed."""

LEADER_NAMESPACE = LeaderConfig().namespace
"""The default of leader.namespace: where the agents' Lease lives unless configured."""


def _crd_dir() -> Traversable:
    return files("nodeagent").joinpath("manifests", "crds")


def crd_texts() -> list[tuple[str, str]]:
    """(file name, YAML text) of every CRD manifest."""
    directory = _crd_dir()
    return [(name, directory.joinpath(name).read_text(encoding="utf-8")) for name in CRD_FILES]


def crd_documents() -> list[dict[str, Any]]:
    """The CRDs as API objects (``apiextensions.k8s.io/v1`` CustomResourceDefinition dicts)."""
    docs: list[dict[str, Any]] = []
    for name, text in crd_texts():
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict):
            raise ValueError(f"{name}: not a YAML mapping")
        docs.append(doc)
    return docs


def crd_stream() -> str:
    """Every CRD as one multi-document YAML stream, for ``kubectl apply -f -``."""
    parts = []
    for _, text in crd_texts():
        parts.append(text if text.endswith("\n") else text + "\n")
    return "---\n" + "---\n".join(parts)


def namespace_document(name: str = LEADER_NAMESPACE) -> dict[str, Any]:
    """The Namespace ``name``, for the leader's Lease. Without the Pod Security labels of
    packaging/kubernetes/namespace.yaml: applying those is what lets the node agents' pods
    mount host paths, which a namespace made for the Lease alone does not need."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {LABEL_NAME: AGENT}},
    }


def namespace_stream(name: str = LEADER_NAMESPACE) -> str:
    """The Namespace as a YAML document, for ``kubectl apply -f -``."""
    return "---\n" + yaml.safe_dump(namespace_document(name), sort_keys=False)
