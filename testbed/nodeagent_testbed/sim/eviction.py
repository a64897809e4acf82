"""The policy/v1 Eviction subresource with PodDisruptionBudget checks, as kube-apiserver's
pkg/registry/core/pod/storage/eviction.go does it.

The eviction is checked against the Eviction object (its name and namespace must be the URL's),
its dry-run options (query and body must agree), the pod's phase (terminal, pending and
terminating pods go without a budget check) and the one budget that selects the pod: a budget
still being processed (status.observedGeneration behind) gives 429 with Retry-After 10, a negative
status.disruptionsAllowed or more than 2,000 unconfirmed status.disruptedPods 403, no disruption
left 429. Before the pod is deleted it gets a DisruptionTarget condition. kube-apiserver retries
conflicts on the pod and on the budget, which a single-threaded store never has.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from nodeagent_testbed.sim.errors import ApiError
from nodeagent_testbed.sim.selectors import SelectorError, label_selector_as_selector
from nodeagent_testbed.sim.store import Obj, Store, now_iso

MAX_DISRUPTED_PODS = 2000  # MaxDisruptedPodSize
RETRY_PROCESSING = 10  # seconds: the Retry-After of a budget still being processed


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
            if label_selector_as_selector(sel).matches(labels):
                out.append(pdb)
        except SelectorError:
            continue
    return out


def _status(code: int) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def _delete_options(body: dict[str, Any], query_dry_run: Sequence[str]) -> dict[str, Any]:
    """propagateDryRun: the dry-run options of the request and of the body must agree."""
    opts = dict(body.get("deleteOptions") or {})
    if not opts.get("dryRun"):
        opts["dryRun"] = list(query_dry_run)
    elif query_dry_run and list(query_dry_run) != list(opts["dryRun"]):
        raise ApiError(
            500,
            f"Non-matching dry-run options in request and content: "
            f"[{' '.join(query_dry_run)}] and [{' '.join(opts['dryRun'])}]",
            reason="",
        )
    for v in opts["dryRun"]:
        if v != "All":
            raise ApiError(400, f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return opts


def evict(
    store: Store,
    namespace: str,
    name: str,
    body: dict[str, Any],
    query_dry_run: Sequence[str] = (),
) -> Obj:
    """Evict one pod; returns the Status to send (201, or 500 for more than one budget), raises
    ApiError when refused."""
    m = body.get("metadata") or {}
    if m.get("name") != name:
        raise ApiError(400, "name in URL does not match name in Eviction object")
    if m.get("namespace") and m["namespace"] != namespace:
        raise ApiError(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        )
    opts = _delete_options(body, query_dry_run)
    if opts.get("ignoreStoreReadErrorWithClusterBreakingPotential"):
        raise ApiError(
            422,
            f'Eviction.policy "{name}" is invalid: '
            "deleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential: Invalid value: true: "
            "can not be set for pod eviction, try after removing the option",
            reason="Invalid",
        )
    dry_run = bool(opts["dryRun"])
    pods = store.resource("", "v1", "pods")
    pod = store.get(pods, namespace, name)
    phase = (pod.get("status") or {}).get("phase")
    # terminal, pending and already terminating pods cannot count against a budget
    if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
        _condition_and_delete(store, namespace, name, opts, dry_run)
        return _status(201)
    pdbs = matching_pdbs(store, pod)
    if len(pdbs) > 1:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction "
            "subresource does not support.",
            "code": 500,
        }
    if pdbs:
        pdb = pdbs[0]
        spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
        healthy = int(status.get("currentHealthy", 0))
        desired = int(status.get("desiredHealthy", 0))
        unhealthy_goes = not _ready(pod) and (
            spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
            or (healthy >= desired and desired > 0)
        )
        # an unhealthy pod of a healthy application goes without spending a disruption
        if not unhealthy_goes:
            _check_and_decrement(store, name, pdb, dry_run)
    _condition_and_delete(store, namespace, name, opts, dry_run)
    return _status(201)


def _check_and_decrement(store: Store, pod_name: str, pdb: Obj, dry_run: bool) -> None:
    pdb_name = pdb["metadata"]["name"]
    status = pdb.get("status") or {}
    if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
        raise _too_many_requests(
            f"The disruption budget {pdb_name} is still being processed by the server.",
            RETRY_PROCESSING,
        )
    allowed = int(status.get("disruptionsAllowed", 0))
    if allowed < 0:
        negative = "pdb disruptions allowed is negative"
        raise _forbidden(pdb_name, negative, negative)
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise _forbidden(
            pdb_name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            "too many pending evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise _too_many_requests(_no_disruption_message(pdb_name, status), 0)
    if dry_run:
        return

    def take_one(p: Obj) -> None:
        st = p.setdefault("status", {})
        st["disruptionsAllowed"] = int(st.get("disruptionsAllowed", 0)) - 1
        if st["disruptionsAllowed"] == 0:  # UpdateDisruptionAllowedCondition
            _set_condition(
                st,
                {
                    "type": "DisruptionAllowed",
                    "status": "False",
                    "reason": "InsufficientPods",
                    "message": "",
                    "observedGeneration": st.get("observedGeneration", 0),
                },
            )
        disrupted = st.get("disruptedPods") or {}
        st["disruptedPods"] = {**copy.deepcopy(disrupted), pod_name: now_iso()}

    pdb_type = store.resource("policy", "v1", "poddisruptionbudgets")
    store.mutate(pdb_type, pdb["metadata"]["namespace"], pdb_name, take_one, "status")


def _no_disruption_message(pdb_name: str, status: Obj) -> str:
    cond = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None
    )
    failed = cond is not None and cond.get("status") == "False" and cond.get("message")
    healthy, desired = int(status.get("currentHealthy", 0)), int(status.get("desiredHealthy", 0))
    if failed and cond is not None and cond.get("reason") == "SyncFailed":
        return (
            f"The disruption budget {pdb_name} does not allow evicting pods currently because it "
            f"failed sync: {cond['message']}"
        )
    if healthy <= desired:
        return (
            f"The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} "
            "currently"
        )
    if failed and cond is not None:
        return (
            f"The disruption budget {pdb_name} does not allow evicting pods currently "
            f"({cond.get('reason')}): {cond['message']}"
        )
    return f"The disruption budget {pdb_name} does not allow evicting pods currently"


def _set_condition(status: Obj, cond: Obj) -> None:
    conds = [dict(c) for c in status.get("conditions") or []]
    for c in conds:
        if c.get("type") == cond["type"]:
            if c.get("status") != cond["status"]:
                c["lastTransitionTime"] = now_iso()
            c.update(cond)
            break
    else:
        conds.append({**cond, "lastTransitionTime": now_iso()})
    status["conditions"] = conds


def _condition_and_delete(
    store: Store, namespace: str, name: str, opts: dict[str, Any], dry_run: bool
) -> None:
    """addConditionAndDeletePod: the preconditions checked, a DisruptionTarget condition, then
    the deletion."""
    pods = store.resource("", "v1", "pods")
    pre = opts.get("preconditions") or {}
    if not dry_run:
        pod = store.get(pods, namespace, name)
        m = pod["metadata"]
        if pre.get("uid") and pre["uid"] != m["uid"]:
            raise _conflict(name, "UID", pre["uid"], m["uid"], "deleted and then recreated")
        if pre.get("resourceVersion") and pre["resourceVersion"] != m["resourceVersion"]:
            raise _conflict(
                name, "ResourceVersion", pre["resourceVersion"], m["resourceVersion"], "modified"
            )

        def disruption_target(p: Obj) -> None:
            st = p.setdefault("status", {})
            conds = [c for c in st.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            old: Obj = next(
                (c for c in st.get("conditions") or [] if c.get("type") == "DisruptionTarget"), {}
            )
            since = old.get("lastTransitionTime") if old.get("status") == "True" else None
            conds.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": since or now_iso(),
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                }
            )
            st["conditions"] = conds

        store.mutate(pods, namespace, name, disruption_target, "status")
        pre = {k: v for k, v in pre.items() if k != "resourceVersion"}  # we bumped it ourselves
    store.delete(pods, namespace, name, opts.get("gracePeriodSeconds"), pre, dry_run=dry_run)


def _too_many_requests(cause: str, retry_after: int) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(
        429,
        "Cannot evict pod as it would violate the pod's disruption budget.",
        reason="TooManyRequests",
        details=details,
    )


def _forbidden(pdb_name: str, err: str, cause: str) -> ApiError:
    return ApiError(
        403,
        f'poddisruptionbudget.policy "{pdb_name}" is forbidden: {err}',
        reason="Forbidden",
        details={
            "name": pdb_name,
            "group": "policy",
            "kind": "poddisruptionbudget",
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {pdb_name} does not allow evicting pods "
                    f"currently: {cause}",
                }
            ],
        },
    )


def _conflict(name: str, field: str, want: str, have: str, how: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on Pod "{name}": the {field} in the precondition '
        f"({want}) does not match the {field} in record ({have}). The object might have been "
        f"{how}",
        reason="Conflict",
        details={"name": name, "kind": "Pod"},
    )
