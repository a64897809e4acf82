"""The policy/v1 Eviction subresource with PodDisruptionBudget checks, as kube-apiserver does it."""

from __future__ import annotations

import copy
from typing import Any

from nodeagent.model.selectors import SelectorError, label_selector_from_dict
from nodeagent.sim.errors import ApiError
from nodeagent.sim.store import Obj, Store, now_iso


def _ready(pod: Obj) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def matching_pdbs(store: Store, pod: Obj) -> list[Obj]:
    ns = pod["metadata"].get("namespace")
    labels = pod["metadata"].get("labels") or {}
    out = []
    for pdb in store.list(store.resource("policy", "v1", "poddisruptionbudgets"), ns):
        sel = (pdb.get("spec") or {}).get("selector")
        if sel is None:
            continue  # a nil selector matches nothing in policy/v1
        try:
            if label_selector_from_dict(sel).matches(labels):
                out.append(pdb)
        except SelectorError:
            continue
    return out


def evict(store: Store, namespace: str, name: str, body: dict[str, Any]) -> Obj:
    """Evict one pod; returns the Status to send, raises ApiError with 429/500 when refused."""
    pods = store.resource("", "v1", "pods")
    pod = store.get(pods, namespace, name)
    opts = body.get("deleteOptions") or {}
    grace = opts.get("gracePeriodSeconds")
    pre = opts.get("preconditions")
    success: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    phase = (pod.get("status") or {}).get("phase")
    # terminal, pending and already terminating pods cannot count against a budget
    if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
        store.delete(pods, namespace, name, grace, pre)
        return success
    pdbs = matching_pdbs(store, pod)
    if len(pdbs) > 1:
        raise ApiError(
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
        )
    if not pdbs:
        store.delete(pods, namespace, name, grace, pre)
        return success
    pdb = pdbs[0]
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    policy = spec.get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
    if not _ready(pod) and (
        policy == "AlwaysAllow"
        or int(status.get("currentHealthy", 0)) >= int(status.get("desiredHealthy", 0))
    ):
        store.delete(pods, namespace, name, grace, pre)
        return success
    pdb_name = pdb["metadata"]["name"]
    if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
        raise _refused(pdb_name, "the disruption budget is still being processed by the server")
    if int(status.get("disruptionsAllowed", 0)) <= 0:
        raise _refused(
            pdb_name,
            f"The disruption budget {pdb_name} needs {status.get('desiredHealthy', 0)} healthy "
            f"pods and has {status.get('currentHealthy', 0)} currently",
        )

    def take_one(p: Obj) -> None:
        st = p.setdefault("status", {})
        st["disruptionsAllowed"] = int(st.get("disruptionsAllowed", 0)) - 1
        disrupted = st.get("disruptedPods") or {}
        st["disruptedPods"] = {**copy.deepcopy(disrupted), name: now_iso()}

    pdb_type = store.resource("policy", "v1", "poddisruptionbudgets")
    store.mutate(pdb_type, namespace, pdb_name, take_one, "status")
    store.delete(pods, namespace, name, grace, pre)
    return success


def _refused(pdb_name: str, cause: str) -> ApiError:
    return ApiError(
        429,
        "Cannot evict pod as it would violate the pod's disruption budget.",
        reason="TooManyRequests",
        details={"causes": [{"reason": "DisruptionBudget", "message": cause}]},
    )
