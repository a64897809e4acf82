"""Every label, annotation, finalizer, taint, interceptor and actor name the node agent uses,
and the built-in priority classes, defined once (Kubernetes' `well_known_labels.go`). Modules
import them from here; the manifests and the admission policy are checked against them."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "AGENT",
    "ANNOTATE_RESPONDER_DOMAIN",
    "ANNOTATION_SHUTDOWN_TYPE",
    "BRIDGE_OPT_OUT_LABEL",
    "BRIDGE_REQUESTER",
    "BUILTIN_PRIORITIES",
    "CORDONED_BY_ANNOTATION",
    "DAEMONSET_INTERCEPTOR",
    "DAEMONSET_RESPONDER",
    "DRAIN_ANNOTATION",
    "FINALIZER",
    "FINAL_PHASE_ANNOTATION",
    "IMPERATIVE_INTERCEPTOR",
    "IMPERATIVE_RESPONDER",
    "IMPERATIVE_RESPONDER_PRIORITY",
    "INTERCEPTORS_ANNOTATION",
    "KUBELET_INTERCEPTOR",
    "LABEL_BOOT_ID",
    "LABEL_MANAGED_BY",
    "LABEL_NAME",
    "LABEL_TRIGGER",
    "LABEL_USERSPACE_BOOT",
    "LAST_APPLIED",
    "MAINTENANCE_TAINT",
    "MIRROR_ANNOTATION",
    "NODE_LABEL",
    "OWN_RESPONDER_PRIORITY",
    "REQUESTER",
    "STATIC_POD_RESPONDER",
    "SYSTEM_CRITICAL_PRIORITY",
    "TAINT_TEXT",
    "UPSTREAM_BRIDGE_REQUESTER",
    "UPSTREAM_REQUESTER",
    "ZONE_LABEL",
]

# --- actors ---------------------------------------------------------------------------------------

AGENT = "nodeagent"
"""The agent as an actor: field manager, Events' reporting component, logind inhibitor owner,
and the managed-by value of the maintenances it makes."""
REQUESTER = "nodemaintenance.k8s.io"
"""The one requester name every maintenance asks for evictions with."""
BRIDGE_REQUESTER = "eviction-bridge.nodeagent.io"
"""The eviction bridge's requester: a legacy eviction (kubectl drain, an autoscaler) it turned
into an EvictionRequest. A DNS subdomain, as our CRD wants requester names."""
UPSTREAM_BRIDGE_REQUESTER = "nodeagent.io/eviction-bridge"
"""The bridge's requester name on the upstream API (a domain-prefixed key there)."""

# --- interceptors (KEP-4563) ----------------------------------------------------------------------

KUBELET_INTERCEPTOR = "kubelet.k8s.io"
"""Mirror pods' interceptor: the node agent stops their static pods (`node.staticpods`)."""
DAEMONSET_INTERCEPTOR = "daemonset.apps.k8s.io"
IMPERATIVE_INTERCEPTOR = "imperative-eviction.k8s.io"

# --- the upstream EvictionRequest API (lifecycle.k8s.io/v1alpha1) ------------------------------

UPSTREAM_REQUESTER = "nodeagent.io/node-maintenance"
"""The maintenances' requester name on the upstream API, which reserves `*.k8s.io` for itself."""
IMPERATIVE_RESPONDER = "imperative-eviction.k8s.io/evictor"
"""The default responder every pod's Eviction ends with: the policy/v1 Eviction API."""
IMPERATIVE_RESPONDER_PRIORITY = 100
"""The server refuses any other priority for it; 0-999 are reserved to `*.k8s.io` responders."""
DAEMONSET_RESPONDER = "nodeagent.io/daemonset"
"""The DaemonSet interceptor's name as a responder (`daemonset.apps.k8s.io` is reserved)."""
STATIC_POD_RESPONDER = "nodeagent.io/static-pod"
"""The node agents' `kubelet.k8s.io` interceptor as a responder (each for its node's pods)."""
ANNOTATE_RESPONDER_DOMAIN = "annotate.nodeagent.io"
"""An annotate-and-wait rule responds as `annotate.nodeagent.io/<rule name>`."""
OWN_RESPONDER_PRIORITY = 10000
"""Our responders' first priority, the one the API suggests to a pod's managing controller;
the next of a pod's interceptors gets one less, so they keep the order they have on our CRD."""

# --- labels ---------------------------------------------------------------------------------------

NODE_LABEL = "nodeagent.io/node"
"""Label on EvictionRequests (the target pod's node) and on the shutdown maintenance (its node)."""
LABEL_TRIGGER = "nodeagent.io/trigger"
BRIDGE_OPT_OUT_LABEL = "nodeagent.io/eviction-bridge"
"""Namespace label: ``disabled`` keeps the eviction bridge out of the namespace's evictions
(its webhook's namespaceSelector, and the bridge's own check of a review)."""
LABEL_BOOT_ID = "nodeagent.io/boot-id"
"""On a shutdown maintenance: the kernel's boot id, as the kubelet reports it."""
LABEL_USERSPACE_BOOT = "nodeagent.io/userspace-boot"
"""On a shutdown maintenance: PID 1's start time (hex), where PID 1 is the system's init."""
ZONE_LABEL = "topology.kubernetes.io/zone"
"""The well-known node label of its zone: the default of ``nodeMaintenance.zoneLabel``."""
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_NAME = "app.kubernetes.io/name"

# --- annotations ----------------------------------------------------------------------------------

CORDONED_BY_ANNOTATION = "nodeagent.io/cordoned-by"
"""Node annotation: the maintenances holding nodeagent's cordon of the node."""
INTERCEPTORS_ANNOTATION = "nodeagent.io/eviction-interceptors"
"""Pod annotation: comma-separated, ordered interceptor names (index 0 goes first)."""
DRAIN_ANNOTATION = "nodeagent.io/drain"
"""Pod annotation; ``skip``: the pod is never targeted and never blocks a drain (DESIGN 2.1)."""
FINAL_PHASE_ANNOTATION = "nodeagent.io/final-phase"
ANNOTATION_SHUTDOWN_TYPE = "nodeagent.io/shutdown-type"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Set by the kubelet on the mirror pod of every static pod."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl apply's copy of the whole object."""

# --- finalizers and taints ------------------------------------------------------------------------

FINALIZER = "nodeagent.io/maintenance-completion"
"""The NodeMaintenance controller's finalizer: Complete runs before the object goes."""
MAINTENANCE_TAINT: Mapping[str, str] = {"key": "nodeagent.io/maintenance", "effect": "NoSchedule"}
"""The DaemonSet interceptor's taint, so a DaemonSet does not recreate the pods it evicts."""
TAINT_TEXT = f"{MAINTENANCE_TAINT['key']}:{MAINTENANCE_TAINT['effect']}"

# --- built-in priority classes --------------------------------------------------------------------

BUILTIN_PRIORITIES: Mapping[str, int] = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
"""The API server's built-in PriorityClasses (a static pod may name one without it existing)."""
SYSTEM_CRITICAL_PRIORITY = BUILTIN_PRIORITIES["system-cluster-critical"]
"""The kubelet's (and so the final phase's) line between critical pods and the rest."""
