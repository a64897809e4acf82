"""The eviction request controller (KEP-4563) with its ``imperative-eviction.k8s.io``
interceptor; leader only. See DESIGN sections 2.2 and 2.3.

`controller` is the shell; the decision is pure: `reconcile` (whose turn it is, what the
request's status says), `imperative` (the imperative interceptor's turn), `plan` (what they
return).
"""

from nodeagent.controllers.evictionrequest.controller import (
    EventSink,
    EvictionClient,
    EvictionRequestController,
)
from nodeagent.controllers.evictionrequest.plan import Plan
from nodeagent.controllers.evictionrequest.reconcile import plan_request
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
