"""The eviction request controller (KEP-4563) with its ``imperative-eviction.k8s.io``
interceptor; leader only. See DESIGN sections 2.2 and 2.3."""

from nodeagent.controllers.evictionrequest.controller import (
    EventSink,
    EvictionClient,
    EvictionRequestController,
)
from nodeagent.controllers.evictionrequest.reconcile import (
    EvictionOutcome,
    ImperativeState,
    Plan,
    plan_request,
)
from nodeagent.controllers.settings import AnnotateRule, EvictionSettings

__all__ = [
    "AnnotateRule",
    "EventSink",
    "EvictionClient",
    "EvictionOutcome",
    "EvictionRequestController",
    "EvictionSettings",
    "ImperativeState",
    "Plan",
    "plan_request",
]
