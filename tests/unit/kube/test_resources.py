from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from nodeagent.kube.resources import (
    CRDS,
    EVICTIONREQUESTS,
    LEASES,
    NODEMAINTENANCES,
    NODES,
    PDBS,
    PODS,
    format_micro_time,
    format_time,
    parse_time,
)


def test_core_paths() -> None:
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("kube-system") == "/api/v1/namespaces/kube-system/pods"
    assert PODS.path("ns", "web-0") == "/api/v1/namespaces/ns/pods/web-0"
    assert PODS.path("ns", "web-0", "eviction") == "/api/v1/namespaces/ns/pods/web-0/eviction"
    assert NODES.path(name="node-1") == "/api/v1/nodes/node-1"
    assert NODES.path(name="node-1", subresource="status") == "/api/v1/nodes/node-1/status"


def test_group_paths() -> None:
    assert LEASES.path("ns", "agent") == "/apis/coordination.k8s.io/v1/namespaces/ns/leases/agent"
    assert PDBS.path("ns") == "/apis/policy/v1/namespaces/ns/poddisruptionbudgets"
    assert (
        CRDS.path(name="nodemaintenances.nodeagent.io")
        == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodemaintenances.nodeagent.io"
    )
    assert NODEMAINTENANCES.path(name="m", subresource="status") == (
        "/apis/nodeagent.io/v1alpha1/nodemaintenances/m/status"
    )
    assert EVICTIONREQUESTS.path() == "/apis/nodeagent.io/v1alpha1/evictionrequests"


def test_api_version_and_kind() -> None:
    assert PODS.api_version == "v1"
    assert NODEMAINTENANCES.api_version == "nodeagent.io/v1alpha1"
    assert NODEMAINTENANCES.kind == "NodeMaintenance"
    assert not NODEMAINTENANCES.namespaced
    assert EVICTIONREQUESTS.kind == "EvictionRequest"
    assert EVICTIONREQUESTS.namespaced
    assert str(LEASES) == "leases.coordination.k8s.io"
    assert str(PODS) == "pods"


def test_names_are_escaped() -> None:
    assert PODS.path("ns", "a b/c") == "/api/v1/namespaces/ns/pods/a%20b%2Fc"


@pytest.mark.parametrize(
    "call",
    [
        lambda: NODES.path("ns"),  # cluster-scoped with a namespace
        lambda: PODS.path(None, "web-0"),  # namespaced name without a namespace
        lambda: PODS.path("ns", None, "status"),  # subresource without a name
        lambda: PODS.path("ns", ".."),
        lambda: PODS.path("", "x"),
    ],
)
def test_bad_paths(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


def test_time_formats() -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    assert format_time(when) == "2024-05-06T07:08:09Z"
    assert format_micro_time(when) == "2024-05-06T07:08:09.123456Z"
    plus2 = when.astimezone(timezone(timedelta(hours=2)))
    assert format_micro_time(plus2) == "2024-05-06T07:08:09.123456Z"
    assert parse_time("2024-05-06T07:08:09.123456Z") == when
    assert parse_time("2024-05-06T07:08:09Z") == when.replace(microsecond=0)
    assert parse_time("2024-05-06T09:08:09+02:00") == when.replace(microsecond=0)
