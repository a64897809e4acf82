"""meta.k8s.io/v1 Tables for kubectl get: built-in printers, CRD printer columns, JSONPath, ages."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeagent_testbed.sim.resources import BUILTIN, ResourceType, types_from_crd
from nodeagent_testbed.sim.tables import JSONPathError, human_duration, jsonpath, parse_time, table

NOW = 1_714_564_800.0  # 2024-05-01T12:00:00Z


def ago(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - seconds))


def rt_of(plural: str, group: str = "") -> ResourceType:
    return next(t for t in BUILTIN if t.plural == plural and t.group == group)


def obj(name: str, age: float = 300, **fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": ago(age), "resourceVersion": "42"},
        **fields,
    }


def header(t: dict[str, Any], wide: bool = False) -> list[str]:
    """The header kubectl prints."""
    return [c["name"].upper() for c in t["columnDefinitions"] if wide or c["priority"] == 0]


def cells(t: dict[str, Any], row: int = 0, wide: bool = False) -> list[Any]:
    defs = t["columnDefinitions"]
    return [
        c for c, d in zip(t["rows"][row]["cells"], defs, strict=True) if wide or d["priority"] == 0
    ]


# --- HumanDuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-3, "<invalid>"),
        (-2, "<invalid>"),
        (-1.5, "0s"),
        (-1, "0s"),
        (0, "0s"),
        (0.9, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (300, "5m"),
        (330, "5m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 30 * 60, "3h30m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 59 * 60, "47h"),
        (48 * 3600, "2d"),
        (53 * 3600, "2d5h"),
        (8 * 86400, "8d"),
        (400 * 86400, "400d"),
        (2 * 365 * 86400, "2y"),
        (2 * 365 * 86400 + 10 * 86400, "2y10d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 365 * 86400}
_DURATION = re.compile(r"^(\d+)([smhdy])(?:(\d+)([smhdy]))?$")


def _lower_bound(text: str) -> tuple[int, int]:
    """Seconds the text stands for at least, and the size of its last unit."""
    m = _DURATION.match(text)
    assert m, text
    total = int(m.group(1)) * _UNIT[m.group(2)]
    last = _UNIT[m.group(2)]
    if m.group(3):
        total += int(m.group(3)) * _UNIT[m.group(4)]
        last = _UNIT[m.group(4)]
        assert _UNIT[m.group(4)] < _UNIT[m.group(2)]
    return total, last


@settings(max_examples=500)
@given(st.floats(0, 20 * 365 * 86400), st.floats(0, 20 * 365 * 86400))
def test_human_duration_is_monotonic_and_truncates(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    lo_s, lo_unit = _lower_bound(human_duration(lo))
    hi_s, _ = _lower_bound(human_duration(hi))
    assert lo_s <= hi_s
    # the text never overstates the age and is off by less than its last unit
    assert lo_s <= lo < lo_s + lo_unit


@given(st.integers(0, 20 * 365 * 86400))
def test_human_duration_has_two_or_three_significant_figures(seconds: int) -> None:
    text = human_duration(seconds)
    digits = sum(len(d) for d in re.findall(r"\d+", text))
    assert digits <= 4  # e.g. "179m", "2y10d", "119s"


def test_parse_time() -> None:
    assert parse_time("2024-05-01T12:00:00Z") == NOW
    assert parse_time("2024-05-01T14:00:00+02:00") == NOW
    assert parse_time("2024-05-01T12:00:00.250000Z") == NOW + 0.25
    assert parse_time("2024-05-01") is None
    assert parse_time("") is None
    assert parse_time(None) is None


# --- table shape -------------------------------------------------------------------------------


def test_table_envelope_and_partial_object_metadata() -> None:
    ns = obj("default", status={"phase": "Active"})
    t = table(rt_of("namespaces"), [ns], now=NOW, list_rv="99")
    assert t["kind"] == "Table"
    assert t["apiVersion"] == "meta.k8s.io/v1"
    assert t["metadata"] == {"resourceVersion": "99"}
    assert t["columnDefinitions"][0] == {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": t["columnDefinitions"][0]["description"],
        "priority": 0,
    }
    assert t["columnDefinitions"][0]["description"].startswith("Name must be unique")
    assert header(t) == ["NAME", "STATUS", "AGE"]
    assert t["rows"] == [
        {
            "cells": ["default", "Active", "5m"],
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": ns["metadata"],
            },
        }
    ]


def test_include_object_and_single_object_resource_version() -> None:
    ns = obj("kube-system", status={"phase": "Active"})
    full = table(rt_of("namespaces"), [ns], "Object", now=NOW)
    assert full["rows"][0]["object"] is ns
    assert full["metadata"] == {"resourceVersion": "42"}
    none = table(rt_of("namespaces"), [ns], "None", now=NOW)
    assert "object" not in none["rows"][0]
    empty = table(rt_of("namespaces"), [], now=NOW)
    assert empty["rows"] == [] and empty["metadata"] == {}


def test_age_uses_the_clock_by_default() -> None:
    ns = {
        "metadata": {
            "name": "x",
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    }
    assert table(rt_of("namespaces"), [ns])["rows"][0]["cells"][2] in ("0s", "1s", "2s")
    assert table(rt_of("namespaces"), [{"metadata": {"name": "y"}}])["rows"][0]["cells"][2] == (
        "<unknown>"
    )


# --- nodes -------------------------------------------------------------------------------------


def node(name: str, ready: str | None = "True", **spec: Any) -> dict[str, Any]:
    n = obj(name, age=3 * 86400, spec=spec, status={"nodeInfo": {"kubeletVersion": "v1.37.1"}})
    if ready is not None:
        n["status"]["conditions"] = [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": ready},
        ]
    return n


def test_nodes() -> None:
    cp = node("cp")
    cp["metadata"]["labels"] = {
        "node-role.kubernetes.io/control-plane": "",
        "kubernetes.io/role": "master",
        "node-role.kubernetes.io/": "ignored",
    }
    cp["status"]["addresses"] = [
        {"type": "Hostname", "address": "cp"},
        {"type": "InternalIP", "address": "10.0.0.1"},
    ]
    cp["status"]["nodeInfo"].update(
        osImage="Debian", kernelVersion="6.1", containerRuntimeVersion="containerd://2.0"
    )
    t = table(
        rt_of("nodes"),
        [
            cp,
            node("w1", "False"),
            node("w2", None, unschedulable=True),
            node("w3", unschedulable=True),
        ],
        now=NOW,
    )
    assert header(t) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert header(t, wide=True)[5:] == [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    assert [r["cells"][:5] for r in t["rows"]] == [
        ["cp", "Ready", "control-plane,master", "3d", "v1.37.1"],
        ["w1", "NotReady", "<none>", "3d", "v1.37.1"],
        ["w2", "Unknown,SchedulingDisabled", "<none>", "3d", "v1.37.1"],
        ["w3", "Ready,SchedulingDisabled", "<none>", "3d", "v1.37.1"],
    ]
    assert t["rows"][0]["cells"][5:] == ["10.0.0.1", "<none>", "Debian", "6.1", "containerd://2.0"]
    assert t["rows"][1]["cells"][5:] == ["<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"]


# --- pods --------------------------------------------------------------------------------------


def pod(
    name: str, phase: str = "Running", statuses: list[dict[str, Any]] | None = None, **kw: Any
) -> dict[str, Any]:
    p = obj(
        name,
        age=90,
        spec={"nodeName": "n1", "containers": [{"name": "app", "image": "nginx"}]},
        status={"phase": phase, "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}]},
    )
    if statuses is not None:
        p["status"]["containerStatuses"] = statuses
    p["metadata"].update(kw)
    return p


RUNNING = {
    "name": "app",
    "ready": True,
    "restartCount": 0,
    "state": {"running": {"startedAt": ago(80)}},
}


def test_pods() -> None:
    crashing = {
        "name": "app",
        "ready": False,
        "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(330)}},
    }
    pending = pod("pending", "Pending")
    pending["spec"].pop("nodeName")
    pending["status"] = {"phase": "Pending"}
    creating = pod(
        "creating",
        "Pending",
        [{"name": "app", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}],
    )
    done = pod(
        "done",
        "Succeeded",
        [
            {
                "name": "app",
                "ready": False,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            }
        ],
    )
    t = table(
        rt_of("pods"),
        [
            pod("web", statuses=[RUNNING]),
            pod("crash", statuses=[crashing]),
            pod("going", statuses=[RUNNING], deletionTimestamp=ago(-30)),
            pending,
            creating,
            done,
            pod("gone-done", "Succeeded", deletionTimestamp=ago(0)),
        ],
        now=NOW,
    )
    assert header(t) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert header(t, wide=True)[5:] == ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert [cells(t, i) for i in range(len(t["rows"]))] == [
        ["web", "1/1", "Running", "0", "90s"],
        ["crash", "0/1", "CrashLoopBackOff", "3 (5m30s ago)", "90s"],
        ["going", "1/1", "Terminating", "0", "90s"],
        ["pending", "0/1", "Pending", "0", "90s"],
        ["creating", "0/1", "ContainerCreating", "0", "90s"],
        ["done", "0/1", "Completed", "0", "90s"],
        ["gone-done", "0/1", "Succeeded", "0", "90s"],
    ]
    assert t["rows"][0]["cells"][5:] == ["10.1.0.5", "n1", "<none>", "<none>"]
    assert t["rows"][3]["cells"][5:] == ["<none>", "<none>", "<none>", "<none>"]
    assert "conditions" not in t["rows"][0]
    assert t["rows"][5]["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]


def test_pod_init_containers_and_sidecars() -> None:
    p = pod("init", "Pending")
    p["spec"]["initContainers"] = [{"name": "setup"}, {"name": "more"}]
    p["status"]["initContainerStatuses"] = [
        {"name": "setup", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "more", "state": {"running": {}}},
    ]
    failing = pod("failing", "Pending")
    failing["spec"]["initContainers"] = [{"name": "setup"}]
    failing["status"]["initContainerStatuses"] = [
        {"name": "setup", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    ]
    sidecar = pod("sidecar", statuses=[RUNNING])
    sidecar["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always"}]
    sidecar["status"]["initContainerStatuses"] = [
        {
            "name": "proxy",
            "started": True,
            "ready": True,
            "restartCount": 1,
            "state": {"running": {}},
        }
    ]
    gated = pod("gated", "Pending")
    gated["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    ]
    gated["spec"]["readinessGates"] = [{"conditionType": "example.com/ready"}]
    t = table(rt_of("pods"), [p, failing, sidecar, gated], now=NOW)
    assert [r["cells"][1:4] for r in t["rows"]] == [
        ["0/1", "Init:1/2", "0"],
        ["0/1", "Init:CrashLoopBackOff", "2"],
        ["2/2", "Running", "1"],
        ["0/1", "SchedulingGated", "0"],
    ]
    assert t["rows"][3]["cells"][8] == "0/1"


# --- workloads ---------------------------------------------------------------------------------


def test_deployments_replicasets_statefulsets() -> None:
    template = {
        "spec": {"containers": [{"name": "a", "image": "img:1"}, {"name": "b", "image": "img:2"}]}
    }
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
    }
    deploy = obj(
        "web",
        spec={"replicas": 3, "selector": selector, "template": template},
        status={"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    )
    t = table(rt_of("deployments", "apps"), [deploy], now=NOW)
    assert header(t) == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert t["rows"][0]["cells"] == [
        "web",
        "2/3",
        3,
        2,
        "5m",
        "a,b",
        "img:1,img:2",
        "app=web,tier in (a,b)",
    ]

    rs = obj(
        "web-abc",
        spec={"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
        status={"replicas": 3, "readyReplicas": 1},
    )
    t = table(rt_of("replicasets", "apps"), [rs], now=NOW)
    assert header(t) == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert [c["type"] for c in t["columnDefinitions"][1:4]] == ["integer"] * 3
    assert t["rows"][0]["cells"] == ["web-abc", 3, 3, 1, "5m", "a,b", "img:1,img:2", "app=web"]

    sts = obj("db", spec={"template": template}, status={"readyReplicas": 1})
    t = table(rt_of("statefulsets", "apps"), [sts], now=NOW)
    assert header(t) == ["NAME", "READY", "AGE"]
    assert cells(t) == ["db", "1/1", "5m"]  # replicas defaults to 1


def test_daemonsets() -> None:
    ds = obj(
        "agent",
        spec={
            "selector": {},
            "template": {"spec": {"nodeSelector": {"b": "2", "a": "1"}, "containers": []}},
        },
        status={
            "desiredNumberScheduled": 3,
            "currentNumberScheduled": 3,
            "numberReady": 2,
            "updatedNumberScheduled": 3,
            "numberAvailable": 2,
        },
    )
    t = table(rt_of("daemonsets", "apps"), [ds], now=NOW)
    assert header(t) == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE SELECTOR",
        "AGE",
    ]
    assert t["rows"][0]["cells"] == ["agent", 3, 3, 2, 3, 2, "a=1,b=2", "5m", "", "", "<none>"]


def test_poddisruptionbudgets() -> None:
    pdbs = [
        obj("min", spec={"minAvailable": 2}, status={"disruptionsAllowed": 1}),
        obj("max", spec={"maxUnavailable": "25%"}),
    ]
    t = table(rt_of("poddisruptionbudgets", "policy"), pdbs, now=NOW)
    assert header(t) == ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
    assert [r["cells"] for r in t["rows"]] == [
        ["min", "2", "N/A", 1, "5m"],
        ["max", "N/A", "25%", 0, "5m"],
    ]


def test_leases_configmaps_secrets_and_more() -> None:
    t = table(
        rt_of("leases", "coordination.k8s.io"),
        [obj("leader", spec={"holderIdentity": "agent-1"}), obj("free", spec={})],
        now=NOW,
    )
    assert header(t) == ["NAME", "HOLDER", "AGE"]
    assert [r["cells"] for r in t["rows"]] == [["leader", "agent-1", "5m"], ["free", "", "5m"]]

    t = table(rt_of("configmaps"), [obj("cfg", data={"a": "1"}, binaryData={"b": "AA=="})], now=NOW)
    assert header(t) == ["NAME", "DATA", "AGE"] and t["rows"][0]["cells"] == ["cfg", 2, "5m"]

    t = table(
        rt_of("secrets"),
        [obj("s", type="kubernetes.io/tls", data={"tls.crt": "", "tls.key": ""})],
        now=NOW,
    )
    assert header(t) == ["NAME", "TYPE", "DATA", "AGE"]
    assert t["rows"][0]["cells"] == ["s", "kubernetes.io/tls", 2, "5m"]

    t = table(
        rt_of("priorityclasses", "scheduling.k8s.io"),
        [obj("high", value=1000, preemptionPolicy="Never")],
        now=NOW,
    )
    assert header(t) == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert t["rows"][0]["cells"] == ["high", 1000, False, "5m", "Never"]

    svc = obj(
        "web",
        spec={
            "type": "NodePort",
            "clusterIPs": ["10.96.0.10"],
            "selector": {"app": "web"},
            "ports": [
                {"port": 80, "nodePort": 30080, "protocol": "TCP"},
                {"port": 53, "protocol": "UDP"},
            ],
        },
    )
    t = table(rt_of("services"), [svc], now=NOW)
    assert header(t) == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert t["rows"][0]["cells"] == [
        "web",
        "NodePort",
        "10.96.0.10",
        "<none>",
        "80:30080/TCP,53/UDP",
        "5m",
        "app=web",
    ]

    rev = obj("agent-5d4f", revision=3)
    rev["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": True}
    ]
    t = table(rt_of("controllerrevisions", "apps"), [rev], now=NOW)
    assert t["rows"][0]["cells"] == ["agent-5d4f", "daemonset.apps/agent", 3, "5m"]


def test_everything_else_is_name_and_age() -> None:
    limitranges = ResourceType("", "v1", "limitranges", "limitrange", "LimitRange", True)
    t = table(limitranges, [obj("lr")], now=NOW)
    assert header(t) == ["NAME", "AGE"] and t["rows"][0]["cells"] == ["lr", "5m"]


def test_events_core_and_events_k8s_io() -> None:
    core = obj(
        "n1.17a",
        type="Warning",
        reason="NodeNotReady",
        message="  Node is not ready \n",
        involvedObject={"kind": "Node", "name": "n1", "fieldPath": ""},
        source={"component": "node-controller"},
        firstTimestamp=ago(600),
        lastTimestamp=ago(60),
        count=4,
    )
    t = table(rt_of("events"), [core], now=NOW)
    assert header(t) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert header(t, wide=True) == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]
    assert t["rows"][0]["cells"] == [
        "60s",
        "Warning",
        "NodeNotReady",
        "node/n1",
        "",
        "node-controller",
        "Node is not ready",
        "10m",
        4,
        "n1.17a",
    ]
    new = obj(
        "m1.18b",
        type="Normal",
        reason="Draining",
        note="draining",
        regarding={"kind": "NodeMaintenance", "name": "m1"},
        eventTime="2024-05-01T11:59:00.000000Z",
        reportingController="nodeagent.io/maintenance",
        reportingInstance="agent-1",
    )
    t = table(rt_of("events", "events.k8s.io"), [new], now=NOW)
    assert t["rows"][0]["cells"] == [
        "60s",
        "Normal",
        "Draining",
        "nodemaintenance/m1",
        "",
        "nodeagent.io/maintenance, agent-1",
        "draining",
        "60s",
        1,
        "m1.18b",
    ]
    series = dict(core, series={"count": 9, "lastObservedTime": ago(5)})
    assert table(rt_of("events"), [series], now=NOW)["rows"][0]["cells"][0::8] == ["5s", 9]


def test_customresourcedefinitions_show_created_at() -> None:
    crd = obj("nodemaintenances.nodeagent.io", age=86400)
    t = table(rt_of("customresourcedefinitions", "apiextensions.k8s.io"), [crd], now=NOW)
    assert header(t) == ["NAME", "CREATED AT"]
    assert t["rows"][0]["cells"] == ["nodemaintenances.nodeagent.io", "2024-04-30T12:00:00Z"]


# --- custom resources --------------------------------------------------------------------------


def crd(columns: list[dict[str, Any]] | None) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1alpha1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if columns is not None:
        version["additionalPrinterColumns"] = columns
    return {
        "metadata": {"name": "nodemaintenances.nodeagent.io"},
        "spec": {
            "group": "nodeagent.io",
            "scope": "Cluster",
            "names": {
                "plural": "nodemaintenances",
                "kind": "NodeMaintenance",
                "shortNames": ["nm"],
            },
            "versions": [version],
        },
    }


NM_COLUMNS: list[dict[str, Any]] = [
    {"name": "Stage", "type": "string", "jsonPath": ".spec.stage"},
    {
        "name": "Drained",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Drained")].status',
    },
    {"name": "Targets", "type": "integer", "jsonPath": ".status.drainTargets[-1].podPriority"},
    {"name": "Ratio", "type": "number", "jsonPath": ".status.ratio"},
    {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
    {
        "name": "Since",
        "type": "date",
        "jsonPath": '.status.conditions[?(@.type=="Drained")].lastTransitionTime',
    },
    {
        "name": "Reason",
        "type": "string",
        "jsonPath": ".spec.reason",
        "priority": 1,
        "description": "Why.",
    },
    {
        "name": "Nodes",
        "type": "string",
        "jsonPath": ".spec.nodeSelector.nodeSelectorTerms[*].matchFields[0].values",
    },
]


def test_custom_resource_printer_columns() -> None:
    (rt,) = types_from_crd(crd(NM_COLUMNS))
    m = obj(
        "m1",
        spec={
            "stage": "Drain",
            "paused": False,
            "reason": "kernel",
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"values": ["n1", "n2"]}]}]},
        },
        status={
            "conditions": [
                {"type": "Cordoned", "status": "True", "lastTransitionTime": ago(4000)},
                {"type": "Drained", "status": "False", "lastTransitionTime": ago(330)},
            ],
            "drainTargets": [{"podPriority": 0}, {"podPriority": 2000000000.0}],
            "ratio": 1,
        },
    )
    bare = obj("m2", spec={})
    t = table(rt, [m, bare], now=NOW)
    assert header(t) == ["NAME", "STAGE", "DRAINED", "TARGETS", "RATIO", "PAUSED", "SINCE", "NODES"]
    assert header(t, wide=True)[7] == "REASON"
    assert t["rows"][0]["cells"] == [
        "m1",
        "Drain",
        "False",
        2000000000,
        1.0,
        False,
        "5m30s",
        "kernel",
        '["n1","n2"]',
    ]
    assert t["rows"][1]["cells"] == ["m2", None, None, None, None, None, None, None, None]
    defs = {d["name"]: d for d in t["columnDefinitions"]}
    assert defs["Since"]["type"] == "date"
    assert defs["Reason"] == {
        "name": "Reason",
        "type": "string",
        "format": "",
        "description": "Why.",
        "priority": 1,
    }
    assert (
        defs["Stage"]["description"]
        == "Custom resource definition column (in JSONPath format): .spec.stage"
    )


def test_custom_resource_cells_convert_like_the_tableconvertor() -> None:
    columns = [
        {"name": "S", "type": "string", "jsonPath": ".v"},
        {"name": "I", "type": "integer", "jsonPath": ".v"},
        {"name": "D", "type": "date", "jsonPath": ".v"},
    ]
    (rt,) = types_from_crd(crd(columns))
    rows = table(
        rt,
        [obj("a", v=1.5), obj("b", v={"k": [1, True]}), obj("c", v="not a time"), obj("d", v=True)],
        now=NOW,
    )["rows"]
    assert [r["cells"][1:] for r in rows] == [
        ["1.5", 1, None],
        ['{"k":[1,true]}', None, None],
        ["not a time", None, "<invalid>"],
        ["true", None, None],
    ]


def test_custom_resource_without_columns_is_name_and_age() -> None:
    (rt,) = types_from_crd(crd(None))
    t = table(rt, [obj("m1", age=7200)], now=NOW)
    assert header(t) == ["NAME", "AGE"]
    assert t["columnDefinitions"][1]["type"] == "date"
    assert t["rows"][0]["cells"] == ["m1", "120m"]


def test_a_bad_column_path_gives_empty_cells() -> None:
    (rt,) = types_from_crd(crd([{"name": "X", "type": "string", "jsonPath": ".a[?(@.b=="}]))
    assert table(rt, [obj("m1", a=[{"b": 1}])], now=NOW)["rows"][0]["cells"] == ["m1", None]


# --- JSONPath ----------------------------------------------------------------------------------

DOC: dict[str, Any] = {
    "metadata": {"name": "m1", "labels": {"app.kubernetes.io/name": "agent", "b": "2"}},
    "status": {
        "conditions": [
            {"type": "Cordoned", "status": "True", "n": 1},
            {"type": "Drained", "status": "False", "n": 5},
            {"type": "Ready", "status": "True", "n": 10, "extra": None},
        ],
        "drainTargets": [],
    },
}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (".metadata.name", ["m1"]),
        ("{.metadata.name}", ["m1"]),
        ("$.metadata.name", ["m1"]),
        ("metadata.name", ["m1"]),
        (".metadata.missing", []),
        (".metadata.name.deeper", []),
        (".metadata.labels['app.kubernetes.io/name']", ["agent"]),
        (".metadata.labels.app\\.kubernetes\\.io/name", ["agent"]),
        (".metadata.labels.*", ["agent", "2"]),
        (".status.conditions[0].type", ["Cordoned"]),
        (".status.conditions[-1].type", ["Ready"]),
        (".status.conditions[5].type", []),
        (".status.conditions[0,2].type", ["Cordoned", "Ready"]),
        (".status.conditions[1:].type", ["Drained", "Ready"]),
        (".status.conditions[*].type", ["Cordoned", "Drained", "Ready"]),
        ('.status.conditions[?(@.type=="Drained")].status', ["False"]),
        (".status.conditions[?(@.type == 'Ready')].n", [10]),
        ('.status.conditions[?(@.status!="True")].type', ["Drained"]),
        (".status.conditions[?(@.n > 1)].type", ["Drained", "Ready"]),
        (".status.conditions[?(@.n <= 5)].type", ["Cordoned", "Drained"]),
        (".status.conditions[?(@.n == '5')].type", []),
        (".status.conditions[?(@.extra)].type", ["Ready"]),
        ('.status.conditions[?(@.type=="Gone")].status', []),
        (".status.drainTargets[*].podPriority", []),
        ("..type", ["Cordoned", "Drained", "Ready"]),
        ("..conditions[1].n", [5]),
        (".metadata.name[?(@.x)]", []),
    ],
)
def test_jsonpath(expr: str, expected: list[Any]) -> None:
    assert jsonpath(expr, DOC) == expected


@pytest.mark.parametrize(
    "expr", [".a[", ".a[x]", ".a[?(@.b==)]", ".a[?(b==1)]", ".a..", ".a[::0]", ".a[1:2:3:4]"]
)
def test_jsonpath_errors(expr: str) -> None:
    with pytest.raises(JSONPathError):
        jsonpath(expr, DOC)
