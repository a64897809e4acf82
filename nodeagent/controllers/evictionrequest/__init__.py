"""The eviction request controller (KEP-4563) with its ``imperative-eviction.k8s.io``
interceptor; leader only. See DESIGN sections 2.2 and 2.3.

`controller` is the shell; the decision is pure, in :mod:`nodeagent.model.evictionrequest`.
"""

from nodeagent.controllers.evictionrequest.controller import (
    EventSink,
    EvictionClient,
    EvictionRequestController,
)
from nodeagent.model.evictionrequest.plan import Plan
from nodeagent.model.evictionrequest.reconcile import plan_request
from nodeagent.model.interceptors.settings import AnnotateRule, EvictionSettings

__all__ = [
    "AnnotateRule",
    "EventSink",
    "EvictionClient",
    "EvictionRequestController",
    "EvictionSettings",
    "Plan",
    "plan_request",
]
