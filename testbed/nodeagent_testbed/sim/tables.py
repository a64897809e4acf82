"""`meta.k8s.io/v1` Tables, as the API server renders them for `kubectl get`.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints what the
server sends: column definitions (kubectl upper-cases their names and hides those with a priority
above 0 unless ``-o wide``) and one row of cells per object. Like the real server, every row holds
the cells of all columns, wide ones included.

Built-in types get the columns of Kubernetes' own printers (pkg/printers/internalversion): nodes,
pods, deployments, replicasets, statefulsets, daemonsets, poddisruptionbudgets, namespaces, leases,
events (core and events.k8s.io), configmaps, secrets, services, serviceaccounts, priorityclasses,
controllerrevisions, customresourcedefinitions (``NAME CREATED AT``, the default table
convertor), and lifecycle.k8s.io's evictionrequests and evictions (`lifecycle_tables`). Any
other built-in gets ``NAME AGE``. Custom resources get ``NAME`` plus their
`additionalPrinterColumns`, evaluated with the small JSONPath evaluator below, or ``NAME AGE``
when the CRD declares none (what CRD defaulting gives).

The JSONPath subset: ``.a.b``, ``['a.b']``, ``.a[0]``, ``.a[-1]``, ``.a[1:3]``, ``.a[0,2]``,
``.a[*]``, ``.*``, ``..a`` (recursive descent) and filters ``[?(@.type=="Drained")]`` with
``== != < <= > >=`` against string, number, boolean and null literals, or ``[?(@.a)]`` for
existence. A column shows the first match only, as the real server does.

Pure: no I/O; the clock is read only when `now` is not given.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodeagent_testbed.sim.resources import ResourceType

Obj = dict[str, Any]
Column = dict[str, Any]
Printer = Callable[[Obj, float], list[Any]]

__all__ = [
    "JSONPathError",
    "human_duration",
    "jsonpath",
    "parse_time",
    "table",
]

NAME_DESC = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
AGE_DESC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate operations. "
    "Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\n"
    "Populated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_CONTAINERS_DESC = "Names of each container in the template."
_IMAGES_DESC = "Images referenced by each container in the template."


# --- public API --------------------------------------------------------------------------------


def table(
    rt: ResourceType,
    objs: list[Obj],
    include_object: str = "PartialObjectMetadata",
    now: float | None = None,
    list_rv: str | None = None,
) -> dict[str, Any]:
    """The Table for `objs` of type `rt`.

    `include_object` is the request's `includeObject`: "Object" puts the full object in each row,
    "None" no object, anything else ("Metadata", the default) a PartialObjectMetadata. The table's
    resourceVersion is `list_rv` for a list, or the object's own for a single object.
    """
    t = time.time() if now is None else now
    columns, printer = _printer_for(rt)
    rows: list[dict[str, Any]] = []
    for obj in objs:
        row: dict[str, Any] = {"cells": printer(obj, t)}
        if rt.group == "" and rt.plural == "pods":
            conditions = _pod_row_conditions(obj)
            if conditions:
                row["conditions"] = conditions
        included = _row_object(obj, include_object)
        if included is not None:
            row["object"] = included
        rows.append(row)
    meta: dict[str, Any] = {}
    if list_rv is not None:
        meta["resourceVersion"] = list_rv
    elif len(objs) == 1:
        rv = (objs[0].get("metadata") or {}).get("resourceVersion")
        if rv:
            meta["resourceVersion"] = rv
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns,
        "rows": rows,
    }


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration: ~2-3 significant figures, e.g. 45s, 5m30s, 3h, 2d."""
    if not math.isfinite(seconds):
        return "<invalid>"
    s = int(seconds)  # truncates toward zero, as Go's int(d.Seconds())
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if rest == 0 else f"{years}y{rest}d"
    return f"{hours // 24 // 365}y"


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp (metav1.Time/MicroTime), else None."""
    if not isinstance(value, str):
        return None
    m = _RFC3339.match(value)
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    try:
        dt = datetime.datetime(y, mo, d, h, mi, s, tzinfo=datetime.UTC)
    except ValueError:
        return None
    t = dt.timestamp() + (float(m.group(7)) if m.group(7) else 0.0)
    if m.group(9):
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        t -= offset if m.group(9) == "+" else -offset
    return t


class JSONPathError(ValueError):
    pass


def jsonpath(expr: str, obj: Any) -> list[Any]:
    """All values `expr` selects in `obj`; missing keys select nothing (AllowMissingKeys)."""
    return _evaluate(_parse(expr), [obj])


# --- columns and printers ----------------------------------------------------------------------


def _col(
    name: str, type_: str = "string", desc: str = "", priority: int = 0, fmt: str = ""
) -> Column:
    return {"name": name, "type": type_, "format": fmt, "description": desc, "priority": priority}


_NAME = _col("Name", fmt="name", desc=NAME_DESC)
_AGE = _col("Age", desc=AGE_DESC)


def _printer_for(rt: ResourceType) -> tuple[list[Column], Printer]:
    if rt.printer_columns or rt.schema is not None:
        return _custom(rt)
    found = _BUILTIN.get((rt.group, rt.plural)) or _lifecycle().get((rt.group, rt.plural))
    if found is not None:
        return list(found[0]), found[1]
    return [_NAME, _AGE], lambda o, now: [_name(o), _age(o, now)]


def _lifecycle() -> dict[tuple[str, str], tuple[tuple[Column, ...], Printer]]:
    # imported here, not above: lifecycle.k8s.io's printers use this module's helpers
    from nodeagent_testbed.sim.lifecycle_tables import PRINTERS

    return PRINTERS


def _name(o: Obj) -> str:
    return str((o.get("metadata") or {}).get("name", ""))


def _since(value: Any, now: float) -> str:
    """translateTimestampSince: the age of a timestamp, "<unknown>" when unset."""
    t = parse_time(value)
    return "<unknown>" if t is None else human_duration(now - t)


def _age(o: Obj, now: float) -> str:
    return _since((o.get("metadata") or {}).get("creationTimestamp"), now)


def _get(o: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(o, dict):
            return None
        o = o.get(k)
    return o


def _int(x: Any, default: int = 0) -> int:
    if isinstance(x, bool):
        return default
    if isinstance(x, int):
        return x
    if isinstance(x, float) and math.isfinite(x):
        return int(x)
    return default


def _str(x: Any) -> str:
    return x if isinstance(x, str) else ""


def _format_labels(labels: Any) -> str:
    """labels.FormatLabels."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _selector_string(sel: Any) -> str:
    """metav1.LabelSelectorAsSelector(sel).String()."""
    if not isinstance(sel, dict):
        return ""
    reqs: list[tuple[str, str]] = []
    for k, v in (sel.get("matchLabels") or {}).items():
        reqs.append((k, f"{k}={v}"))
    for e in sel.get("matchExpressions") or []:
        if not isinstance(e, dict):
            continue
        key, op = str(e.get("key", "")), e.get("operator")
        values = ",".join(sorted(str(v) for v in e.get("values") or []))
        if op == "In":
            reqs.append((key, f"{key} in ({values})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({values})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
    reqs.sort(key=lambda r: r[0])
    return ",".join(r for _, r in reqs)


def _format_selector(sel: Any) -> str:
    """metav1.FormatLabelSelector."""
    return _selector_string(sel) or "<none>"


def _containers(template_spec: Any) -> list[str]:
    containers = _get(template_spec, "containers") or []
    names = ",".join(_str(c.get("name")) for c in containers if isinstance(c, dict))
    images = ",".join(_str(c.get("image")) for c in containers if isinstance(c, dict))
    return [names, images]


def _int_or_string(x: Any) -> str:
    if isinstance(x, str):
        return x
    return str(_int(x))


# nodes


def _node(o: Obj, now: float) -> list[Any]:
    status: list[str] = []
    for c in _get(o, "status", "conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            status = ["Ready" if c.get("status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if _get(o, "spec", "unschedulable") is True:
        status.append("SchedulingDisabled")
    roles: set[str] = set()
    for k, v in (_get(o, "metadata", "labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/") and len(k) > len("node-role.kubernetes.io/"):
            roles.add(k[len("node-role.kubernetes.io/") :])
        elif k == "kubernetes.io/role" and v:
            roles.add(str(v))
    info = _get(o, "status", "nodeInfo") or {}
    addresses = [a for a in _get(o, "status", "addresses") or [] if isinstance(a, dict)]

    def address(kind: str) -> str:
        return next((_str(a.get("address")) for a in addresses if a.get("type") == kind), "<none>")

    return [
        _name(o),
        ",".join(status),
        ",".join(sorted(roles)) or "<none>",
        _age(o, now),
        _str(info.get("kubeletVersion")),
        address("InternalIP"),
        address("ExternalIP"),
        _str(info.get("osImage")) or "<unknown>",
        _str(info.get("kernelVersion")) or "<unknown>",
        _str(info.get("containerRuntimeVersion")) or "<unknown>",
    ]


# pods


def _pod(o: Obj, now: float) -> list[Any]:
    spec = o.get("spec") or {}
    status = o.get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    containers = spec.get("containers") or []
    init_specs = {
        _str(c.get("name")): c for c in spec.get("initContainers") or [] if isinstance(c, dict)
    }

    def restartable(name: str) -> bool:
        return bool(_get(init_specs.get(name), "restartPolicy") == "Always")

    total = len(containers) + sum(1 for n in init_specs if restartable(n))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: float | None = None
    sidecar_last_restart: float | None = None
    phase = _str(status.get("phase"))
    reason = _str(status.get("reason")) or phase
    for c in conditions:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    def finished(cs: Obj) -> float | None:
        return parse_time(_get(cs, "lastState", "terminated", "finishedAt"))

    def later(a: float | None, b: float | None) -> float | None:
        return b if a is None or (b is not None and b > a) else a

    initializing = False
    init_statuses = [c for c in status.get("initContainerStatuses") or [] if isinstance(c, dict)]
    for i, cs in enumerate(init_statuses):
        name = _str(cs.get("name"))
        restarts += _int(cs.get("restartCount"))
        last_restart = later(last_restart, finished(cs))
        if restartable(name):
            sidecar_restarts += _int(cs.get("restartCount"))
            sidecar_last_restart = later(sidecar_last_restart, finished(cs))
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0:
            continue
        if restartable(name) and cs.get("started") is True:
            if cs.get("ready") is True:
                ready += 1
            continue
        if isinstance(terminated, dict):
            if not terminated.get("reason"):
                if _int(terminated.get("signal")):
                    reason = f"Init:Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
            else:
                reason = f"Init:{terminated['reason']}"
        elif (
            isinstance(waiting, dict)
            and waiting.get("reason")
            and (waiting.get("reason") != "PodInitializing")
        ):
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    initialized = next(
        (c.get("status") == "True" for c in conditions if c.get("type") == "Initialized"), False
    )
    if not initializing or initialized:
        restarts = sidecar_restarts
        last_restart = sidecar_last_restart
        has_running = False
        statuses = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
        for cs in reversed(statuses):
            restarts += _int(cs.get("restartCount"))
            last_restart = later(last_restart, finished(cs))
            state = cs.get("state") or {}
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = _str(waiting["reason"])
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = _str(terminated["reason"])
            elif isinstance(terminated, dict):
                if _int(terminated.get("signal")):
                    reason = f"Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") is True and isinstance(state.get("running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            )
            reason = "Running" if pod_ready else "NotReady"

    if _get(o, "metadata", "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration(now - last_restart)} ago)"

    ips = status.get("podIPs") or []
    ip = _str(ips[0].get("ip")) if ips and isinstance(ips[0], dict) else ""
    ip = ip or _str(status.get("podIP")) or "<none>"
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        true_gates = 0
        for g in gates:
            gate_type = _get(g, "conditionType")
            match = next((c for c in conditions if c.get("type") == gate_type), None)
            if match is not None and match.get("status") == "True":
                true_gates += 1
        gates_cell = f"{true_gates}/{len(gates)}"
    return [
        _name(o),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _age(o, now),
        ip,
        _str(spec.get("nodeName")) or "<none>",
        _str(status.get("nominatedNodeName")) or "<none>",
        gates_cell,
    ]


def _pod_row_conditions(o: Obj) -> list[dict[str, Any]] | None:
    phase = _get(o, "status", "phase")
    if phase == "Succeeded":
        message = "The pod has completed successfully."
    elif phase == "Failed":
        message = "The pod failed."
    else:
        return None
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


# workloads


def _deployment(o: Obj, now: float) -> list[Any]:
    status = o.get("status") or {}
    desired = _int(_get(o, "spec", "replicas"), 1)  # the API server defaults replicas to 1
    return [
        _name(o),
        f"{_int(status.get('readyReplicas'))}/{desired}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(o, now),
        *_containers(_get(o, "spec", "template", "spec")),
        _selector_string(_get(o, "spec", "selector")),
    ]


def _replicaset(o: Obj, now: float) -> list[Any]:
    status = o.get("status") or {}
    return [
        _name(o),
        _int(_get(o, "spec", "replicas"), 1),
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(o, now),
        *_containers(_get(o, "spec", "template", "spec")),
        _format_selector(_get(o, "spec", "selector")),
    ]


def _statefulset(o: Obj, now: float) -> list[Any]:
    ready = _int(_get(o, "status", "readyReplicas"))
    return [
        _name(o),
        f"{ready}/{_int(_get(o, 'spec', 'replicas'), 1)}",
        _age(o, now),
        *_containers(_get(o, "spec", "template", "spec")),
    ]


def _daemonset(o: Obj, now: float) -> list[Any]:
    status = o.get("status") or {}
    template_spec = _get(o, "spec", "template", "spec")
    return [
        _name(o),
        _int(status.get("desiredNumberScheduled")),
        _int(status.get("currentNumberScheduled")),
        _int(status.get("numberReady")),
        _int(status.get("updatedNumberScheduled")),
        _int(status.get("numberAvailable")),
        _format_labels(_get(template_spec, "nodeSelector")),
        _age(o, now),
        *_containers(template_spec),
        _format_selector(_get(o, "spec", "selector")),
    ]


def _controllerrevision(o: Obj, now: float) -> list[Any]:
    controller = "<none>"
    for ref in _get(o, "metadata", "ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            group = _str(ref.get("apiVersion")).rpartition("/")[0]
            kind = _str(ref.get("kind"))
            if kind or group:
                gk = f"{kind}.{group}" if group else kind
                controller = f"{gk.lower()}/{_str(ref.get('name'))}"
            else:
                controller = _str(ref.get("name"))
            break
    return [_name(o), controller, _int(o.get("revision")), _age(o, now)]


def _pdb(o: Obj, now: float) -> list[Any]:
    spec = o.get("spec") or {}
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    return [
        _name(o),
        "N/A" if min_available is None else _int_or_string(min_available),
        "N/A" if max_unavailable is None else _int_or_string(max_unavailable),
        _int(_get(o, "status", "disruptionsAllowed")),
        _age(o, now),
    ]


# cluster objects


def _namespace(o: Obj, now: float) -> list[Any]:
    return [_name(o), _str(_get(o, "status", "phase")), _age(o, now)]


def _lease(o: Obj, now: float) -> list[Any]:
    return [_name(o), _str(_get(o, "spec", "holderIdentity")), _age(o, now)]


def _event(o: Obj, now: float) -> list[Any]:
    """Core v1 and events.k8s.io/v1 events print alike (the server converts both to one type)."""
    new_api = "regarding" in o or "note" in o or "deprecatedCount" in o
    if new_api:
        involved = o.get("regarding") or {}
        first_ts, last_ts = o.get("deprecatedFirstTimestamp"), o.get("deprecatedLastTimestamp")
        count = _int(o.get("deprecatedCount"))
        source = o.get("deprecatedSource") or {}
        message = _str(o.get("note"))
    else:
        involved = o.get("involvedObject") or {}
        first_ts, last_ts = o.get("firstTimestamp"), o.get("lastTimestamp")
        count = _int(o.get("count"))
        source = o.get("source") or {}
        message = _str(o.get("message"))
    first = (
        _since(first_ts, now)
        if parse_time(first_ts) is not None
        else _since(o.get("eventTime"), now)
    )
    last = _since(last_ts, now) if parse_time(last_ts) is not None else first
    series = o.get("series")
    if isinstance(series, dict):
        last = _since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events of the new API have no count
    kind, name = _str(involved.get("kind")).lower(), _str(involved.get("name"))
    component = _str(source.get("component")) or _str(o.get("reportingController"))
    host = _str(source.get("host")) or _str(o.get("reportingInstance"))
    return [
        last,
        _str(o.get("type")),
        _str(o.get("reason")),
        f"{kind}/{name}" if name else kind,
        _str(involved.get("fieldPath")),
        f"{component}, {host}" if host else component,
        message.strip(),
        first,
        count,
        _name(o),
    ]


def _crd(o: Obj, now: float) -> list[Any]:
    t = parse_time(_get(o, "metadata", "creationTimestamp"))
    created = "0001-01-01T00:00:00Z"
    if t is not None:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    return [_name(o), created]


def _configmap(o: Obj, now: float) -> list[Any]:
    n = len(o.get("data") or {}) + len(o.get("binaryData") or {})
    return [_name(o), n, _age(o, now)]


def _secret(o: Obj, now: float) -> list[Any]:
    keys = set(o.get("data") or {}) | set(o.get("stringData") or {})
    return [_name(o), _str(o.get("type")) or "Opaque", len(keys), _age(o, now)]


def _serviceaccount(o: Obj, now: float) -> list[Any]:
    return [_name(o), len(o.get("secrets") or []), _age(o, now)]


def _priorityclass(o: Obj, now: float) -> list[Any]:
    return [
        _name(o),
        _int(o.get("value")),
        o.get("globalDefault") is True,
        _age(o, now),
        _str(o.get("preemptionPolicy")),
    ]


def _service(o: Obj, now: float) -> list[Any]:
    spec = o.get("spec") or {}
    svc_type = _str(spec.get("type")) or "ClusterIP"
    cluster_ips = spec.get("clusterIPs") or []
    cluster_ip = _str(cluster_ips[0]) if cluster_ips else _str(spec.get("clusterIP"))
    external_ips = [_str(x) for x in spec.get("externalIPs") or []]
    if svc_type in ("ClusterIP", "NodePort"):
        external = ",".join(external_ips) or "<none>"
    elif svc_type == "LoadBalancer":
        ingress = _get(o, "status", "loadBalancer", "ingress") or []
        lb = [_str(i.get("ip")) or _str(i.get("hostname")) for i in ingress if isinstance(i, dict)]
        lb = list(dict.fromkeys(x for x in lb if x))
        external = ",".join(lb + external_ips) or "<pending>"
    elif svc_type == "ExternalName":
        external = _str(spec.get("externalName"))
    else:
        external = "<unknown>"
    ports: list[str] = []
    for p in spec.get("ports") or []:
        if not isinstance(p, dict):
            continue
        proto = _str(p.get("protocol")) or "TCP"
        node_port = _int(p.get("nodePort"))
        port = _int(p.get("port"))
        ports.append(f"{port}:{node_port}/{proto}" if node_port > 0 else f"{port}/{proto}")
    return [
        _name(o),
        svc_type,
        cluster_ip or "<none>",
        external,
        ",".join(ports) or "<none>",
        _age(o, now),
        _format_labels(spec.get("selector")),
    ]


_WIDE = 1
_INT = "integer"
_CONTAINERS = _col("Containers", priority=_WIDE, desc=_CONTAINERS_DESC)
_IMAGES = _col("Images", priority=_WIDE, desc=_IMAGES_DESC)
_EVENT_COLUMNS: tuple[Column, ...] = (
    _col("Last Seen", desc="Time of the most recent occurrence of this event."),
    _col("Type", desc="Type of this event (Normal, Warning)."),
    _col("Reason", desc="Short, machine understandable reason for the transition."),
    _col("Object", desc="The object that this event is about."),
    _col("Subobject", priority=_WIDE, desc="The field path of the piece of the object."),
    _col("Source", priority=_WIDE, desc="The component reporting this event."),
    _col("Message", desc="A human-readable description of the status of this operation."),
    _col("First Seen", priority=_WIDE, desc="Time at which the event was first recorded."),
    _col("Count", priority=_WIDE, desc="The number of times this event has occurred."),
    _col("Name", priority=_WIDE, fmt="name", desc=NAME_DESC),
)

# (group, plural) -> columns and the printer of their cells, after pkg/printers/internalversion
_BUILTIN: dict[tuple[str, str], tuple[tuple[Column, ...], Printer]] = {
    ("", "nodes"): (
        (
            _NAME,
            _col("Status", desc="The status of the node"),
            _col("Roles", desc="The roles of the node"),
            _AGE,
            _col("Version", desc="Kubelet Version reported by the node."),
            _col("Internal-IP", priority=_WIDE, desc="Addresses reachable to the node."),
            _col("External-IP", priority=_WIDE, desc="Addresses reachable to the node."),
            _col("OS-Image", priority=_WIDE, desc="OS Image reported by the node."),
            _col("Kernel-Version", priority=_WIDE, desc="Kernel Version reported by the node."),
            _col("Container-Runtime", priority=_WIDE, desc="Container runtime version."),
        ),
        _node,
    ),
    ("", "pods"): (
        (
            _NAME,
            _col("Ready", desc="The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", desc="The aggregate status of the containers in this pod."),
            _col("Restarts", desc="Container restarts, and when the last one restarted."),
            _AGE,
            _col("IP", priority=_WIDE, desc="IP address allocated to the pod."),
            _col("Node", priority=_WIDE, desc="The node the pod is scheduled onto."),
            _col("Nominated Node", priority=_WIDE, desc="The node nominated by the scheduler."),
            _col("Readiness Gates", priority=_WIDE, desc="Readiness gates that are true."),
        ),
        _pod,
    ),
    ("apps", "deployments"): (
        (
            _NAME,
            _col("Ready", desc="Number of the pod with ready state"),
            _col("Up-to-date", desc="Pods that have the desired template spec."),
            _col("Available", desc="Available pods targeted by this deployment."),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _col("Selector", priority=_WIDE, desc="Label selector for pods."),
        ),
        _deployment,
    ),
    ("apps", "replicasets"): (
        (
            _NAME,
            _col("Desired", _INT, "The number of desired pods."),
            _col("Current", _INT, "The most recently observed number of pods."),
            _col("Ready", _INT, "The number of pods with a Ready Condition."),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _col("Selector", priority=_WIDE, desc="A label query over pods."),
        ),
        _replicaset,
    ),
    ("apps", "statefulsets"): (
        (
            _NAME,
            _col("Ready", desc="Number of the pod with ready state"),
            _AGE,
            _CONTAINERS,
            _IMAGES,
        ),
        _statefulset,
    ),
    ("apps", "daemonsets"): (
        (
            _NAME,
            _col("Desired", _INT, "Nodes that should be running the daemon pod."),
            _col("Current", _INT, "Nodes that are running at least 1 daemon pod."),
            _col("Ready", _INT, "Nodes running a daemon pod with a Ready Condition."),
            _col("Up-to-date", _INT, "Nodes that are running the updated daemon pod."),
            _col("Available", _INT, "Nodes running an available daemon pod."),
            _col("Node Selector", desc="Selector which must be true for the pod to fit a node."),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _col("Selector", priority=_WIDE, desc="A label query over pods."),
        ),
        _daemonset,
    ),
    ("apps", "controllerrevisions"): (
        (
            _NAME,
            _col("Controller", desc="Controller of the object"),
            _col("Revision", desc="The revision of the state represented by Data."),
            _AGE,
        ),
        _controllerrevision,
    ),
    ("policy", "poddisruptionbudgets"): (
        (
            _NAME,
            _col("Min Available", desc="The minimum number of pods that must be available."),
            _col("Max Unavailable", desc="The maximum number of pods that may be unavailable."),
            _col("Allowed Disruptions", _INT, "Pods that may be disrupted at this time."),
            _AGE,
        ),
        _pdb,
    ),
    ("", "namespaces"): (
        (_NAME, _col("Status", desc="The status of the namespace"), _AGE),
        _namespace,
    ),
    ("coordination.k8s.io", "leases"): (
        (_NAME, _col("Holder", desc="The identity of the holder of the lease."), _AGE),
        _lease,
    ),
    ("", "events"): (_EVENT_COLUMNS, _event),
    ("events.k8s.io", "events"): (_EVENT_COLUMNS, _event),
    ("", "configmaps"): ((_NAME, _col("Data", desc="Number of data entries."), _AGE), _configmap),
    ("", "secrets"): (
        (_NAME, _col("Type", desc="Type of the secret."), _col("Data", desc="Data entries."), _AGE),
        _secret,
    ),
    ("", "serviceaccounts"): (
        (_NAME, _col("Secrets", desc="Secrets pods of this ServiceAccount may use."), _AGE),
        _serviceaccount,
    ),
    ("", "services"): (
        (
            _NAME,
            _col("Type", desc="How the Service is exposed."),
            _col("Cluster-IP", desc="The IP address of the service."),
            _col("External-IP", desc="IP addresses from outside the cluster."),
            _col("Port(s)", desc="The ports that are exposed by this service."),
            _AGE,
            _col("Selector", priority=_WIDE, desc="Pods that traffic is routed to."),
        ),
        _service,
    ),
    ("scheduling.k8s.io", "priorityclasses"): (
        (
            _NAME,
            _col("Value", _INT, "The value of this priority class."),
            _col("Global-Default", "boolean", "Whether this is the default priority class."),
            _AGE,
            _col("PreemptionPolicy", desc="The policy for preempting pods with lower priority."),
        ),
        _priorityclass,
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        (_NAME, _col("Created At", "date", AGE_DESC)),
        _crd,
    ),
}


# custom resources


_DEFAULT_CR_COLUMNS: tuple[dict[str, Any], ...] = (
    {
        "name": "Age",
        "type": "date",
        "jsonPath": ".metadata.creationTimestamp",
        "description": AGE_DESC,
    },
)


def _custom(rt: ResourceType) -> tuple[list[Column], Printer]:
    specs = rt.printer_columns or _DEFAULT_CR_COLUMNS
    columns = [_NAME]
    paths: list[tuple[str, tuple[_Step, ...] | None]] = []
    for c in specs:
        json_path = _str(c.get("jsonPath"))
        columns.append(
            _col(
                _str(c.get("name")),
                _str(c.get("type")) or "string",
                _str(c.get("description"))
                or f"Custom resource definition column (in JSONPath format): {json_path}",
                _int(c.get("priority")),
                _str(c.get("format")),
            )
        )
        try:
            parsed: tuple[_Step, ...] | None = _parse(json_path)
        except JSONPathError:
            parsed = None
        paths.append((_str(c.get("type")) or "string", parsed))

    def printer(o: Obj, now: float) -> list[Any]:
        cells: list[Any] = [_name(o)]
        for col_type, steps in paths:
            found = _evaluate(steps, [o]) if steps is not None else []
            cells.append(_cr_cell(col_type, found[0], now) if found else None)
        return cells

    return columns, printer


def _cr_cell(col_type: str, value: Any, now: float) -> Any:
    """The tableconvertor's rendering of the first match for a column type."""
    if value is None:
        return None
    if col_type == "string":
        return _print_value(value)
    if col_type == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return int(value)
        return None
    if col_type == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None
    if col_type == "boolean":
        return value if isinstance(value, bool) else None
    if col_type == "date":
        if not isinstance(value, str):
            return None
        if value in ("", "null"):
            return "<unknown>"
        t = parse_time(value)
        return "<invalid>" if t is None else human_duration(now - t)
    return None


def _print_value(value: Any) -> str:
    """client-go jsonpath PrintResults for one value: maps and lists as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


# --- JSONPath ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    kind: str  # key, keys, wild, recurse, index, slice, filter
    keys: tuple[str, ...] = ()
    indices: tuple[int, ...] = ()
    bounds: tuple[int | None, int | None, int | None] = (None, None, None)
    left: tuple[_Step, ...] = ()
    op: str | None = None
    right: Any = None
    right_path: tuple[_Step, ...] | None = None


_OPS = ("==", "!=", "<=", ">=", "<", ">")


@functools.lru_cache(maxsize=512)
def _parse(expr: str) -> tuple[_Step, ...]:
    s = expr.strip()
    if s.startswith("{") and s.endswith("}"):
        s = s[1:-1].strip()
    if s.startswith("$"):
        s = s[1:]
    elif s and s[0] not in ".[@":
        s = "." + s  # be lenient: "metadata.name"
    if s.startswith("@"):
        s = s[1:]
    steps: list[_Step] = []
    i = 0
    while i < len(s):
        if s.startswith("..", i):
            steps.append(_Step("recurse"))
            i += 2
            if i < len(s) and s[i] == "[":
                continue
            i = _parse_name(s, i, steps, expr)
        elif s[i] == ".":
            i = _parse_name(s, i + 1, steps, expr)
        elif s[i] == "[":
            i = _parse_bracket(s, i, steps, expr)
        else:
            raise JSONPathError(f"unexpected {s[i]!r} at {i} in {expr!r}")
    return tuple(steps)


def _parse_name(s: str, i: int, steps: list[_Step], expr: str) -> int:
    name: list[str] = []
    while i < len(s) and s[i] not in ".[":
        if s[i] == "\\" and i + 1 < len(s):
            i += 1
        name.append(s[i])
        i += 1
    key = "".join(name).strip()
    if not key:
        raise JSONPathError(f"empty field name in {expr!r}")
    steps.append(_Step("wild") if key == "*" else _Step("key", keys=(key,)))
    return i


def _scan_quoted(s: str, i: int) -> int:
    """Index just past the string literal opening at s[i]."""
    quote = s[i]
    i += 1
    while i < len(s) and s[i] != quote:
        i += 2 if s[i] == "\\" else 1
    if i >= len(s):
        raise JSONPathError(f"unterminated string in {s!r}")
    return i + 1


def _parse_bracket(s: str, i: int, steps: list[_Step], expr: str) -> int:
    if s.startswith("[?(", i):
        j, depth = i + 3, 1
        while j < len(s) and depth:
            if s[j] in "\"'":
                j = _scan_quoted(s, j)
                continue
            depth += {"(": 1, ")": -1}.get(s[j], 0)
            j += 1
        if depth or j >= len(s) or s[j] != "]":
            raise JSONPathError(f"unterminated filter in {expr!r}")
        steps.append(_parse_filter(s[i + 3 : j - 1], expr))
        return j + 1
    j = i + 1
    while j < len(s) and s[j] != "]":
        j = _scan_quoted(s, j) if s[j] in "\"'" else j + 1
    if j >= len(s):
        raise JSONPathError(f"unterminated [ in {expr!r}")
    inner = s[i + 1 : j].strip()
    if inner == "*":
        steps.append(_Step("wild"))
    elif inner[:1] in ("'", '"'):
        keys = tuple(_literal(part.strip(), expr) for part in _split_top(inner, ","))
        if not all(isinstance(k, str) for k in keys):
            raise JSONPathError(f"bad key list [{inner}] in {expr!r}")
        steps.append(_Step("keys", keys=tuple(str(k) for k in keys)))
    elif ":" in inner:
        parts = [p.strip() for p in inner.split(":")]
        if len(parts) > 3:
            raise JSONPathError(f"bad slice [{inner}] in {expr!r}")
        try:
            nums = [int(p) if p else None for p in parts] + [None] * (3 - len(parts))
        except ValueError as e:
            raise JSONPathError(f"bad slice [{inner}] in {expr!r}") from e
        if nums[2] == 0:
            raise JSONPathError(f"slice step 0 in {expr!r}")
        steps.append(_Step("slice", bounds=(nums[0], nums[1], nums[2])))
    else:
        try:
            indices = tuple(int(p.strip()) for p in inner.split(","))
        except ValueError as e:
            raise JSONPathError(f"bad index [{inner}] in {expr!r}") from e
        steps.append(_Step("index", indices=indices))
    return j + 1


def _split_top(s: str, sep: str) -> list[str]:
    parts: list[str] = []
    start = i = 0
    while i < len(s):
        if s[i] in "\"'":
            i = _scan_quoted(s, i)
            continue
        if s[i] == sep:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return parts


def _parse_filter(body: str, expr: str) -> _Step:
    i = 0
    while i < len(body):
        if body[i] in "\"'":
            i = _scan_quoted(body, i)
            continue
        op = next((o for o in _OPS if body.startswith(o, i)), None)
        if op is not None:
            left, right = body[:i].strip(), body[i + len(op) :].strip()
            if not left.startswith("@"):
                raise JSONPathError(f"filter must compare a @ path in {expr!r}")
            if right.startswith("@"):
                return _Step("filter", left=_parse(left), op=op, right_path=_parse(right))
            return _Step("filter", left=_parse(left), op=op, right=_literal(right, expr))
        i += 1
    left = body.strip()
    if not left.startswith("@"):
        raise JSONPathError(f"filter must test a @ path in {expr!r}")
    return _Step("filter", left=_parse(left))


def _literal(text: str, expr: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        body = text[1:-1]
        return re.sub(r"\\(.)", r"\1", body)
    if text == "true":
        return True
    if text == "false":
        return False
    if text in ("null", "nil"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError as e:
        raise JSONPathError(f"bad literal {text!r} in {expr!r}") from e


def _evaluate(steps: tuple[_Step, ...], nodes: list[Any]) -> list[Any]:
    for step in steps:
        nodes = [out for node in nodes for out in _apply(step, node)]
    return nodes


def _apply(step: _Step, node: Any) -> list[Any]:
    if step.kind in ("key", "keys"):
        if not isinstance(node, dict):
            return []
        return [node[k] for k in step.keys if k in node]
    if step.kind == "wild":
        if isinstance(node, dict):
            return [node[k] for k in sorted(node)]
        return list(node) if isinstance(node, list) else []
    if step.kind == "recurse":
        out: list[Any] = []
        stack = [node]
        while stack:
            n = stack.pop()
            out.append(n)
            if isinstance(n, dict):
                stack.extend(n[k] for k in reversed(sorted(n)))
            elif isinstance(n, list):
                stack.extend(reversed(n))
        return out
    if not isinstance(node, list):
        return []
    if step.kind == "index":
        n = len(node)
        return [node[i] for i in step.indices if -n <= i < n]
    if step.kind == "slice":
        start, stop, stride = step.bounds
        return node[slice(start, stop, stride)]
    # filter
    kept: list[Any] = []
    for el in node:
        lefts = _evaluate(step.left, [el])
        if step.op is None:
            if lefts:
                kept.append(el)
            continue
        if not lefts:
            continue
        if step.right_path is not None:
            rights = _evaluate(step.right_path, [el])
            if not rights:
                continue
            right = rights[0]
        else:
            right = step.right
        if _compare(lefts[0], step.op, right):
            kept.append(el)
    return kept


def _compare(a: Any, op: str, b: Any) -> bool:
    num_a = isinstance(a, int | float) and not isinstance(a, bool)
    num_b = isinstance(b, int | float) and not isinstance(b, bool)
    if (num_a and num_b) or (isinstance(a, str) and isinstance(b, str)):
        if op == "==":
            return bool(a == b)
        if op == "!=":
            return bool(a != b)
        if op == "<":
            return bool(a < b)
        if op == "<=":
            return bool(a <= b)
        if op == ">":
            return bool(a > b)
        return bool(a >= b)
    same = type(a) is type(b) and a == b
    if op == "==":
        return same
    if op == "!=":
        return not same
    return False
