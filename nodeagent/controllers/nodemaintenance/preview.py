"""`nodeagent plan FILE|NAME`: read a NodeMaintenance (a YAML file, `-` for stdin, or one stored
in the cluster), read the nodes, the pods of the selected nodes and the PodDisruptionBudgets,
and print what :func:`nodeagent.model.preview.preview` makes of them. Reads only: nothing is
created, patched or deleted."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml

from nodeagent.kube.client import KubeClient
from nodeagent.kube.connection import load_api_client
from nodeagent.kube.errors import KubeConfigError, KubeError, NotFound
from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PDBS, PODS, Obj
from nodeagent.manifests import crd_documents
from nodeagent.model.bodies import name_of
from nodeagent.model.crdschema import schema_errors
from nodeagent.model.maintenance import selected_nodes
from nodeagent.model.preview.compute import InvalidMaintenance, preview
from nodeagent.model.preview.results import Preview
from nodeagent.model.preview.text import render_text
from nodeagent.model.selectors import DNS_SUBDOMAIN, DNS_SUBDOMAIN_MAX

__all__ = [
    "PlanError",
    "check_against_crd",
    "is_file_argument",
    "plan_command",
    "read_maintenance",
]

_KIND = "NodeMaintenance"


class PlanError(Exception):
    """Cannot preview; the message is the one line to print."""


def is_file_argument(target: str) -> bool:
    """`-`, a path that exists, or anything that cannot be an object name is a file."""
    return (
        target == "-"
        or Path(target).exists()
        or len(target) > DNS_SUBDOMAIN_MAX
        or DNS_SUBDOMAIN.fullmatch(target) is None
    )


def read_maintenance(text: str, source: str) -> Mapping[str, Any]:
    """The one NodeMaintenance of a YAML (or JSON) stream."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise PlanError(f"{source}: not valid YAML: {' '.join(str(e).split())}") from e
    if len(docs) != 1:
        raise PlanError(f"{source}: holds {len(docs)} documents; give one {_KIND}")
    doc = docs[0]
    if not isinstance(doc, dict):
        raise PlanError(f"{source}: not a {_KIND} object")
    kind = doc.get("kind")
    if kind != _KIND:
        raise PlanError(f"{source}: kind is {kind!r}, not {_KIND}")
    api_version = doc.get("apiVersion")
    if api_version is not None and api_version != NODEMAINTENANCES.api_version:
        raise PlanError(
            f"{source}: apiVersion is {api_version!r}, not {NODEMAINTENANCES.api_version}"
        )
    return doc


def _read_file(target: str, stdin: TextIO) -> Mapping[str, Any]:
    if target == "-":
        return read_maintenance(stdin.read(), "stdin")
    try:
        text = Path(target).read_text()
    except OSError as e:
        raise PlanError(f"{target}: cannot read: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise PlanError(f"{target}: not a text file") from e
    return read_maintenance(text, target)


def check_against_crd(nm: Mapping[str, Any]) -> None:
    """What the NodeMaintenance CRD's schema refuses in `nm`'s spec, as kube-apiserver would on
    `kubectl apply` (strict: unknown fields too): the first of it, in one line."""
    for crd in crd_documents():
        if crd["spec"]["names"]["kind"] != _KIND:
            continue
        for version in crd["spec"]["versions"]:
            if f"{crd['spec']['group']}/{version['name']}" != NODEMAINTENANCES.api_version:
                continue
            spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            errors = schema_errors(nm.get("spec"), spec_schema, "spec")
            if errors:
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                raise PlanError(f"{_KIND} {name_of(nm)}: {errors[0]}{more}")


async def _gather(
    kube: KubeClient, nm: Mapping[str, Any] | None, name: str
) -> tuple[Mapping[str, Any], list[Obj], list[Obj], list[Obj]]:
    """The maintenance (fetched when `nm` is None), the nodes, the pods of the selected nodes
    and every PodDisruptionBudget: GETs and LISTs only."""
    if nm is None:
        try:
            nm = await kube.get(NODEMAINTENANCES, name)
        except NotFound:
            raise PlanError(f"{_KIND} {name} not found") from None
    nodes, pdbs = await asyncio.gather(kube.list(NODES), kube.list(PDBS))
    node_items: list[Obj] = nodes.get("items") or []
    chosen = selected_nodes(nm, {str(n["metadata"]["name"]): n for n in node_items})
    pod_lists = await asyncio.gather(
        *(kube.list(PODS, field_selector=f"spec.nodeName={n}") for n in sorted(chosen))
    )
    pods = [p for lst in pod_lists for p in lst.get("items") or []]
    return nm, node_items, pods, pdbs.get("items") or []


async def _preview(kubeconfig: str | None, nm: Mapping[str, Any] | None, name: str) -> Preview:
    kube = KubeClient(load_api_client(kubeconfig), max_workers=4, request_timeout=30)
    try:
        nm, nodes, pods, pdbs = await _gather(kube, nm, name)
    finally:
        await kube.close()
    return preview(nm, nodes, pods, pdbs)


def plan_command(
    target: str,
    kubeconfig: str | None,
    output: str,
    *,
    out: TextIO,
    err: TextIO,
    stdin: TextIO = sys.stdin,
) -> int:
    """`nodeagent plan`. Exit status 0 with the plan printed; 2 for an invalid maintenance or
    a bad argument, file or kubeconfig; 1 when the cluster cannot be read. Without
    `kubeconfig`: $KUBECONFIG, else the in-cluster configuration, else ~/.kube/config (as the
    agent)."""
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    nm: Mapping[str, Any] | None = None
    try:
        if is_file_argument(target):
            nm = _read_file(target, stdin)
            preview(nm, (), ())  # an invalid spec is told before any connection
            check_against_crd(nm)  # and what the API server would refuse besides
        result = asyncio.run(_preview(kubeconfig, nm, target))
    except (PlanError, InvalidMaintenance) as e:
        print(f"nodeagent plan: {e}", file=err)
        return 2
    except KubeConfigError as e:
        print(f"nodeagent plan: {e}", file=err)
        return 2
    except KubeError as e:
        print(f"nodeagent plan: cannot read the cluster: {e}", file=err)
        return 1
    if output == "json":
        json.dump(result.to_dict(), out, indent=2)
        out.write("\n")
    else:
        out.write(render_text(result))
    return 0
