"""Smaller parts of the eviction request controller and the interceptors: settings from
configuration, refusal details, the taint's maintenance coverage, interceptor messages, metrics."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.config import AnnotateInterceptor, EvictionConfig
from nodeagent.config.eviction_settings import eviction_settings
from nodeagent.controllers.interceptors.common import WAITING, completion_message
from nodeagent.kube.errors import TooManyRequests, Unreachable
from nodeagent.kube.evict import refusal_detail
from nodeagent.kube.workqueue import WorkQueue
from nodeagent.model.interceptors.plans import has_taint
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.maintenance import holds_pods_off
from nodeagent.observability.metrics import EvictionRequestMetrics, WorkQueueMetricsFactory

# --- settings ------------------------------------------------------------------------------


def test_settings_from_config() -> None:
    cfg = EvictionConfig(
        heartbeat_deadline=90,
        backoff_base=0.5,
        backoff_cap=600,
        annotate_interceptors=(
            AnnotateInterceptor(
                "mover.couchbase.com",
                {"matchLabels": {"app": "couchbase"}},
                "cao.couchbase.com/reschedule",
            ),
        ),
    )
    settings = eviction_settings(cfg)
    assert settings.heartbeat_deadline == timedelta(seconds=90)
    assert (settings.backoff_base, settings.backoff_cap) == (0.5, 600)
    [rule] = settings.annotate
    assert rule.name == "mover.couchbase.com"
    assert rule.annotation_value == "true"
    assert rule.interceptor.selector.matches({"app": "couchbase"})
    assert settings.configured == (rule.interceptor,)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            AnnotateInterceptor("x.k8s.io", {}, "a/b"),
            "eviction.annotateInterceptors[0].name: 'x.k8s.io' k8s.io names are reserved",
        ),
        (
            AnnotateInterceptor("mover.example.com", {"matchLabel": {}}, "a/b"),
            "eviction.annotateInterceptors[0].podSelector: invalid label selector: matchLabel",
        ),
        (
            AnnotateInterceptor("mover.example.com", {}, "bad key!"),
            "eviction.annotateInterceptors[0].annotationKey: 'bad key!'",
        ),
    ],
)
def test_bad_interceptor_settings_are_named(item: AnnotateInterceptor, message: str) -> None:
    with pytest.raises(ValueError) as info:
        eviction_settings(EvictionConfig(annotate_interceptors=(item,)))
    assert message in str(info.value)


def test_repeated_interceptor_names_are_refused() -> None:
    item = AnnotateInterceptor("mover.example.com", {}, "example.com/move")
    with pytest.raises(ValueError, match=r"annotateInterceptors\[1\].name: .* is repeated"):
        eviction_settings(EvictionConfig(annotate_interceptors=(item, item)))


# --- messages ------------------------------------------------------------------------------


def test_refusal_detail_names_the_budget() -> None:
    exc = TooManyRequests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        status=429,
        reason="TooManyRequests",
        details={"causes": [{"reason": "DisruptionBudget", "message": "web needs 3 healthy"}]},
    )
    assert refusal_detail(exc) == (
        "429 TooManyRequests: Cannot evict pod as it would violate the pod's disruption budget. "
        "web needs 3 healthy"
    )
    assert refusal_detail(Unreachable("connection refused", reason="Unreachable")) == (
        "Unreachable: connection refused"
    )


VIEW = EvictionRequestView.from_obj(
    {"metadata": {"name": "u1"}, "spec": {"target": {"pod": {"name": "p", "uid": "u1"}}}}
)


@pytest.mark.parametrize(
    ("previous", "final"),
    [
        (f"Annotated the pod; {WAITING}", "Annotated the pod; pod p with UID u1 is gone."),
        (
            f"Tainted node n; deleted the pod; {WAITING} The pod tolerates it.",
            "Tainted node n; deleted the pod; pod p with UID u1 is gone. The pod tolerates it.",
        ),
        ("", "Pod p with UID u1 is gone."),
    ],
)
def test_completion_message_keeps_what_was_done(previous: str, final: str) -> None:
    assert completion_message(previous, VIEW) == final


# --- the maintenance taint -----------------------------------------------------------------


NODE = {"metadata": {"name": "node-1", "labels": {"zone": "a"}}}


def nm(stage: str = "Drain", *, deleting: bool = False, node: str = "node-1") -> dict[str, Any]:
    md: dict[str, Any] = {"name": "m"}
    if deleting:
        md["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {
        "metadata": md,
        "spec": {
            "stage": stage,
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        },
    }


@pytest.mark.parametrize(
    ("maintenance", "covers"),
    [
        (nm("Drain"), True),
        # KEP-4212: Idle touches nothing, Cordon evicts nothing (as for the static pods)
        (nm("Cordon"), False),
        (nm("Idle"), False),
        (nm("Complete"), False),
        (nm("Drain", deleting=True), False),
        (nm("Drain", node="node-2"), False),
        ({"metadata": {"name": "m"}, "spec": {"stage": "Drain"}}, False),
    ],
)
def test_the_taint_stays_while_a_maintenance_holds_pods_off(
    maintenance: dict[str, Any], covers: bool
) -> None:
    assert holds_pods_off(maintenance, "node-1", NODE) is covers


def test_has_taint_needs_key_and_effect() -> None:
    def node(*taints: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": "n"}, "spec": {"taints": list(taints)}}

    assert has_taint(node({"key": "nodeagent.io/maintenance", "effect": "NoSchedule"}))
    assert not has_taint(node({"key": "nodeagent.io/maintenance", "effect": "NoExecute"}))
    assert not has_taint(node())
    assert not has_taint({"metadata": {"name": "n"}})


# --- metrics -------------------------------------------------------------------------------


def test_request_series_follow_the_request_and_go_with_it() -> None:
    registry = CollectorRegistry()
    m = EvictionRequestMetrics(registry)
    base = {"namespace": "ns", "evictionrequest": "u1", "pod": "p"}

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {**base, **labels})

    m.observe(
        "ns",
        "u1",
        "p",
        active=["a.example.com"],
        processed=[],
        requesters=["r.example.com"],
        interceptors=["a.example.com", "imperative-eviction.k8s.io"],
    )
    assert value("evictionrequest_controller_active_interceptor", interceptor="a.example.com") == 1
    assert value("evictionrequest_controller_active_requester", requester="r.example.com") == 1
    assert (
        registry.get_sample_value(
            "evictionrequest_controller_pod_interceptors",
            {"namespace": "ns", "pod": "p", "interceptor": "imperative-eviction.k8s.io"},
        )
        == 1
    )
    m.observe(
        "ns",
        "u1",
        "p",
        active=["imperative-eviction.k8s.io"],
        processed=["a.example.com"],
        requesters=["r.example.com"],
        interceptors=["a.example.com", "imperative-eviction.k8s.io"],
    )
    assert (
        value("evictionrequest_controller_active_interceptor", interceptor="a.example.com") is None
    )
    assert (
        value("evictionrequest_controller_processed_interceptor", interceptor="a.example.com") == 1
    )
    m.eviction_attempt("ns", "u1", "p", "refused")
    m.eviction_attempt("ns", "u1", "p", "refused")
    assert value("evictionrequest_controller_imperative_evictions_total", result="refused") == 2

    m.forget("ns", "u1", keep_evictions=True)
    assert (
        value(
            "evictionrequest_controller_active_interceptor",
            interceptor="imperative-eviction.k8s.io",
        )
        is None
    )
    assert value("evictionrequest_controller_imperative_evictions_total", result="refused") == 2
    m.forget("ns", "u1")
    assert value("evictionrequest_controller_imperative_evictions_total", result="refused") is None
    m.forget("ns", "never-seen")


async def test_workqueue_metrics() -> None:
    registry = CollectorRegistry()
    factory = WorkQueueMetricsFactory(registry)
    queue: WorkQueue[str] = WorkQueue("q", metrics=factory.for_queue("q"))
    queue.add("a")
    queue.add("a")  # folded
    queue.add("b")
    assert registry.get_sample_value("workqueue_adds_total", {"name": "q"}) == 2
    assert registry.get_sample_value("workqueue_depth", {"name": "q"}) == 2
    key = await queue.get()
    assert registry.get_sample_value("workqueue_depth", {"name": "q"}) == 1
    queue.add_rate_limited(key)
    queue.done(key)
    assert registry.get_sample_value("workqueue_retries_total", {"name": "q"}) == 1
    queue.shutdown()
