"""Manifests shipped inside the package (package data under ``nodeagent/manifests/``).

The CustomResourceDefinitions of DESIGN section 2 live in ``nodeagent/manifests/crds/*.yaml``;
``packaging/kubernetes/crds/`` links to the same files. ``nodeagent manifests crds`` prints them.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

import yaml

__all__ = ["CRD_FILES", "crd_documents", "crd_stream", "crd_texts"]

CRD_FILES = ("nodemaintenances.yaml", "evictionrequests.yaml")
"""The CRD manifests, in the order they are printed and installed."""


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
