"""Which API resources we talk to, how their URLs are built, and the API's time formats."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from nodeagent.model.bodies import Obj
from nodeagent.model.times import format_micro_time, format_time, parse_time

__all__ = [
    "CRDS",
    "DAEMONSETS",
    "DEPLOYMENTS",
    "EVENTS",
    "EVICTIONREQUESTS",
    "EVICTIONS",
    "LEASES",
    "NAMESPACES",
    "NODEMAINTENANCES",
    "NODES",
    "PDBS",
    "PODS",
    "REPLICASETS",
    "SECRETS",
    "SERVICEACCOUNTS",
    "STATEFULSETS",
    "UPSTREAM_EVICTIONREQUESTS",
    "WEBHOOK_CONFIGURATIONS",
    "Obj",
    "Resource",
    "format_micro_time",
    "format_time",
    "parse_time",
]


def _segment(value: str) -> str:
    if not value or value in (".", ".."):
        raise ValueError(f"invalid path segment {value!r}")
    return quote(value, safe="")


@dataclass(frozen=True, slots=True)
class Resource:
    """An API resource, enough to build its REST paths. `group` is "" for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """The `apiVersion` field of objects of this resource."""
        return self.group + "/" + self.version if self.group else self.version

    @property
    def prefix(self) -> str:
        return "/apis/" + self.api_version if self.group else "/api/" + self.version

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The REST path; without `namespace` a namespaced resource lists across namespaces."""
        if namespace is not None and not self.namespaced:
            raise ValueError(f"{self.plural} is cluster-scoped; got namespace {namespace!r}")
        if subresource is not None and name is None:
            raise ValueError("a subresource needs an object name")
        if name is not None and self.namespaced and namespace is None:
            raise ValueError(f"{self.plural} is namespaced; {name!r} needs a namespace")
        parts = [self.prefix]
        if namespace is not None:
            parts.append("namespaces/" + _segment(namespace))
        parts.append(self.plural)
        if name is not None:
            parts.append(_segment(name))
        if subresource is not None:
            parts.append(_segment(subresource))
        return "/".join(parts)

    def __str__(self) -> str:
        return self.plural + "." + self.group if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
NODEMAINTENANCES = Resource(
    "nodeagent.io", "v1alpha1", "nodemaintenances", "NodeMaintenance", namespaced=False
)
EVICTIONREQUESTS = Resource(
    "nodeagent.io", "v1alpha1", "evictionrequests", "EvictionRequest", namespaced=True
)
# KEP-4563 as Kubernetes serves it (v1.37: gate EvictionRequestAPI, lifecycle.k8s.io/v1alpha1)
UPSTREAM_EVICTIONREQUESTS = Resource(
    "lifecycle.k8s.io", "v1alpha1", "evictionrequests", "EvictionRequest", namespaced=True
)
EVICTIONS = Resource("lifecycle.k8s.io", "v1alpha1", "evictions", "Eviction", namespaced=True)
