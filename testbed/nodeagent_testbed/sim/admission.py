"""Defaulting and validation the real API server applies on write (the parts nodeagent meets)."""

from __future__ import annotations

import re
from typing import Any

from nodeagent_testbed.sim import lifecycle
from nodeagent_testbed.sim.cel import compile_rules
from nodeagent_testbed.sim.errors import ApiError, invalid
from nodeagent_testbed.sim.fieldvalidation import check_unknown
from nodeagent_testbed.sim.qos import default_requests, qos_class
from nodeagent_testbed.sim.resources import CRDError, ResourceType, types_from_crd
from nodeagent_testbed.sim.schema import admit_custom, validate_crd_schema
from nodeagent_testbed.sim.store import Change, Obj, Store, now_iso

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
BUILTIN_PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
# tolerations the DefaultTolerationSeconds admission plugin adds to every pod
_DEFAULT_TOLERATIONS = [
    {
        "key": f"node.kubernetes.io/{k}",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    for k in ("not-ready", "unreachable")
]


def _check_name(rt: ResourceType, obj: Obj) -> None:
    name = obj["metadata"].get("name", "")
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise invalid(
            rt.kind,
            name,
            [
                (
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                    "consist of lower case alphanumeric characters, '-' or '.', and must start and "
                    "end with an alphanumeric character",
                )
            ],
            rt.group,
        )


def admit_any(store: Store, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    if old is None:
        _check_name(rt, obj)


def admit_pod(store: Store, rt: ResourceType, pod: Obj, old: Obj | None) -> None:
    spec: dict[str, Any] = pod.setdefault("spec", {})
    name = pod["metadata"]["name"]
    if old is not None:
        return  # the fields defaulted here are immutable after creation
    if not spec.get("containers"):
        raise invalid("Pod", name, [("spec.containers", "Required value")])
    for i, c in enumerate(spec["containers"]):
        if not c.get("name"):
            raise invalid("Pod", name, [(f"spec.containers[{i}].name", "Required value")])
        if not c.get("image"):
            raise invalid("Pod", name, [(f"spec.containers[{i}].image", "Required value")])
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for t in _DEFAULT_TOLERATIONS:
        if not any(x.get("key") == t["key"] for x in tolerations):
            tolerations.append(dict(t))
    responders = lifecycle.pod_responder_causes(spec)
    if responders:
        raise invalid("Pod", name, responders)
    _admit_priority(store, name, spec)
    default_requests(spec)
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def _admit_priority(store: Store, pod_name: str, spec: dict[str, Any]) -> None:
    """As kube-apiserver's Priority plugin: the value comes from the class (or the global
    default class, else 0); a pod may not state another integer itself."""
    classes = store.resource("scheduling.k8s.io", "v1", "priorityclasses")
    cls = spec.get("priorityClassName")
    value = BUILTIN_PRIORITY.get(cls or "")
    if not cls:
        default = next((pc for pc in store.iter_kind(classes) if pc.get("globalDefault")), None)
        value = int(default.get("value", 0)) if default is not None else 0
    elif value is None:
        pc = store.find(classes, None, cls)
        if pc is None:
            raise ApiError(
                403,
                f'pods "{pod_name}" is forbidden: no PriorityClass with name {cls} was found',
                reason="Forbidden",
            )
        value = int(pc.get("value", 0))
    if "priority" in spec and spec["priority"] != value:
        raise ApiError(
            403,
            f'pods "{pod_name}" is forbidden: the integer value of priority ({spec["priority"]}) '
            f"must not be provided in pod spec; priority admission controller computed {value} "
            f"from the given PriorityClass name",
            reason="Forbidden",
        )
    spec["priority"] = value


_ROLLING = {"maxUnavailable": "25%", "maxSurge": "25%"}


def admit_workload(store: Store, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    """The defaults apps/v1 gives workloads, which kubectl rollout and the actors rely on."""
    spec: dict[str, Any] = obj.setdefault("spec", {})
    spec.setdefault("revisionHistoryLimit", 10)
    if rt.kind != "DaemonSet":
        spec.setdefault("replicas", 1)
    if rt.kind == "Deployment":
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            strategy["rollingUpdate"] = {**_ROLLING, **(strategy.get("rollingUpdate") or {})}
        spec.setdefault("progressDeadlineSeconds", 600)
    elif rt.kind == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault(
            "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
        )
    elif rt.kind == "DaemonSet":
        spec.setdefault(
            "updateStrategy",
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
        )


def admit_pdb(store: Store, rt: ResourceType, pdb: Obj, old: Obj | None) -> None:
    """ValidatePodDisruptionBudgetStatusUpdate for policy/v1: the counts are not negative (so
    no client can store the negative disruptionsAllowed the eviction subresource refuses)."""
    status = pdb.get("status") or {}
    causes = [
        (f"status.{f}", f"Invalid value: {status[f]}: must be greater than or equal to 0")
        for f in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
        if isinstance(status.get(f), int) and status[f] < 0
    ]
    if causes:
        raise invalid("PodDisruptionBudget", pdb["metadata"]["name"], causes, rt.group)


def admit_crd(store: Store, rt: ResourceType, crd: Obj, old: Obj | None) -> None:
    name = crd["metadata"]["name"]
    try:
        types_from_crd(crd)
    except CRDError as e:
        raise invalid("CustomResourceDefinition", name, [("spec", str(e))], rt.group) from e
    causes = []
    for i, v in enumerate((crd.get("spec") or {}).get("versions") or []):
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if schema is not None:
            where = f"spec.versions[{i}].schema.openAPIV3Schema"
            for problem in validate_crd_schema(schema, where):
                field, _, message = problem.partition(": ")
                causes.append((field, message))
            causes.extend(compile_rules(schema, where)[1])
    if causes:
        raise invalid("CustomResourceDefinition", name, causes, rt.group)
    if old is not None and (old.get("spec") or {}).get("group") != (crd.get("spec") or {}).get(
        "group"
    ):
        raise invalid(
            "CustomResourceDefinition", name, [("spec.group", "field is immutable")], rt.group
        )


def admit_custom_object(store: Store, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    dropped: list[str] = []
    causes = admit_custom(rt.schema, obj, old, rt.rules, dropped)
    check_unknown(rt.kind, rt.version, dropped)
    if causes:
        raise invalid(rt.kind, obj["metadata"].get("name", ""), causes, rt.group)


class CRDRegistrar:
    """Serves the types of every CustomResourceDefinition and reports it Established."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.crd_type = store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")

    def on_commit(self, change: Change) -> None:
        kind, key, _, new = change
        if key != self.crd_type.key:
            return
        spec = new.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        self.store.unregister_group_plural(group, plural)
        if kind == "DELETED":
            # the real server deletes the custom objects with the definition
            self.store.drop_resource(group, plural)
            return
        for t in types_from_crd(new):
            self.store.register(t)
            if (t.group, t.plural) not in self.store.admission:
                self.store.add_admission(t.group, t.plural, admit_any)
                self.store.add_admission(t.group, t.plural, admit_custom_object)

    def on_change(self, change: Change) -> None:
        # status is written as a separate change, after every listener saw the creation
        kind, key, _, new = change
        if key != self.crd_type.key or kind == "DELETED":
            return
        status = new.get("status") or {}
        established_now = any(
            c.get("type") == "Established" for c in status.get("conditions") or []
        )
        if established_now and status.get("acceptedNames") == (new.get("spec") or {}).get("names"):
            return

        def established(o: Obj) -> None:
            now = now_iso()
            o["status"] = {
                "acceptedNames": (o.get("spec") or {}).get("names"),
                "storedVersions": [v["name"] for v in o["spec"]["versions"] if v.get("storage")],
                "conditions": [
                    {
                        "type": "NamesAccepted",
                        "status": "True",
                        "reason": "NoConflicts",
                        "message": "no conflicts found",
                        "lastTransitionTime": now,
                    },
                    {
                        "type": "Established",
                        "status": "True",
                        "reason": "InitialNamesAccepted",
                        "message": "the initial names have been accepted",
                        "lastTransitionTime": now,
                    },
                ],
            }

        self.store.mutate(self.crd_type, None, new["metadata"]["name"], established, "status")


def install(store: Store) -> None:
    """Register the built-in admission and the CRD machinery on a store."""
    for rt in list(store.types.values()):
        if rt.kind != "Event":
            store.add_admission(rt.group, rt.plural, admit_any)
    store.add_admission("", "pods", admit_pod)
    for plural in ("deployments", "replicasets", "statefulsets", "daemonsets"):
        store.add_admission("apps", plural, admit_workload)
    store.add_admission("policy", "poddisruptionbudgets", admit_pdb)
    store.add_admission("apiextensions.k8s.io", "customresourcedefinitions", admit_crd)
    lifecycle.install(store)
    registrar = CRDRegistrar(store)
    store.on_commit.append(registrar.on_commit)
    store.listeners.append(registrar.on_change)
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        store.create(
            store.resource("", "v1", "namespaces"),
            None,
            {
                "metadata": {"name": ns},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            },
        )
