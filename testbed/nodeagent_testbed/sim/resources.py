"""The resource types the simulated API server serves, and CRD registration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodeagent_testbed.sim.cel import Rules, compile_rules


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "eviction", "binding", "scale"
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    categories: tuple[str, ...] = ()
    # CRD data: openAPIV3Schema of this version and additionalPrinterColumns
    schema: dict[str, Any] | None = field(default=None, compare=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    # the schema's x-kubernetes-validations, compiled once per CRD version
    rules: Rules | None = field(default=None, compare=False)
    # whether unknown fields are kept (built-ins: we do not model their schemas)
    preserve_unknown: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one store per group and plural, shared by all served versions."""
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _core(
    plural: str, kind: str, namespaced: bool, *short: str, sub: tuple[str, ...] = ()
) -> ResourceType:
    return ResourceType("", "v1", plural, kind.lower(), kind, namespaced, short, sub)


BUILTIN: tuple[ResourceType, ...] = (
    _core("namespaces", "Namespace", False, "ns", sub=("status",)),
    _core("nodes", "Node", False, "no", sub=("status",)),
    _core("pods", "Pod", True, "po", sub=("status", "eviction", "binding")),
    _core("events", "Event", True, "ev"),
    _core("configmaps", "ConfigMap", True, "cm"),
    _core("secrets", "Secret", True),
    _core("services", "Service", True, "svc", sub=("status",)),
    _core("serviceaccounts", "ServiceAccount", True, "sa"),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        True,
        ("deploy",),
        ("status", "scale"),
        categories=("all",),
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        True,
        ("rs",),
        ("status", "scale"),
        categories=("all",),
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        True,
        ("sts",),
        ("status", "scale"),
        categories=("all",),
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        True,
        ("ds",),
        ("status",),
        categories=("all",),
    ),
    ResourceType(
        "apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", True
    ),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        ("pdb",),
        ("status",),
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
    ResourceType("events.k8s.io", "v1", "events", "event", "Event", True, ("ev",)),
    ResourceType(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        False,
        ("pc",),
    ),
    # KEP-4563, served by kube-apiserver v1.37 with the gate EvictionRequestAPI (sim/lifecycle.py)
    ResourceType(
        "lifecycle.k8s.io",
        "v1alpha1",
        "evictionrequests",
        "evictionrequest",
        "EvictionRequest",
        True,
        subresources=("status",),
    ),
    ResourceType(
        "lifecycle.k8s.io",
        "v1alpha1",
        "evictions",
        "eviction",
        "Eviction",
        True,
        subresources=("status",),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        ("status",),
    ),
)


class CRDError(ValueError):
    pass


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves, one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group")
    plural = names.get("plural")
    kind = names.get("kind")
    scope = spec.get("scope")
    name = (crd.get("metadata") or {}).get("name")
    if not group or not plural or not kind:
        raise CRDError("spec.group, spec.names.plural and spec.names.kind are required")
    if name != f"{plural}.{group}":
        raise CRDError(
            f'metadata.name: must be spec.names.plural+"."+spec.group ("{plural}.{group}")'
        )
    if scope not in ("Namespaced", "Cluster"):
        raise CRDError(f'spec.scope: must be "Namespaced" or "Cluster", not {scope!r}')
    versions = spec.get("versions") or []
    if not versions:
        raise CRDError("spec.versions: at least one version is required")
    if sum(1 for v in versions if v.get("storage")) != 1:
        raise CRDError("spec.versions: exactly one version must be the storage version")
    out = []
    for v in versions:
        if not v.get("served", False):
            continue
        subs = v.get("subresources") or {}
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        out.append(
            ResourceType(
                group=group,
                version=v["name"],
                plural=plural,
                singular=names.get("singular") or kind.lower(),
                kind=kind,
                namespaced=scope == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                subresources=tuple(s for s in ("status", "scale") if s in subs),
                categories=tuple(names.get("categories") or ()),
                schema=schema,
                printer_columns=tuple(v.get("additionalPrinterColumns") or ()),
                rules=compile_rules(schema)[0],
                preserve_unknown=bool(
                    schema and schema.get("x-kubernetes-preserve-unknown-fields")
                ),
            )
        )
    return out
