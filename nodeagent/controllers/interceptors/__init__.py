"""Cluster-side interceptors run by the leader (DESIGN 2.3): ``daemonset.apps.k8s.io`` and the
configured annotate-and-wait interceptors. ``imperative-eviction.k8s.io`` lives with the eviction
request controller; ``kubelet.k8s.io`` runs in every node agent."""

from nodeagent.controllers.interceptors.annotate import AnnotateInterceptors
from nodeagent.controllers.interceptors.daemonset import DaemonSetInterceptor

__all__ = [
    "AnnotateInterceptors",
    "DaemonSetInterceptor",
]
