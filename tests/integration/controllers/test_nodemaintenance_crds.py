"""nodeagent's CRDs on both cluster backends: `nodeagent manifests crds | kubectl apply -f -`,
the kinds served, and the CRDs' CEL rules enforced by the API server itself.

kube-apiserver refuses a write that breaks a CEL rule with 422 Invalid and the rule's message,
and so does the simulated API server (nodeagent_testbed.sim.cel); the exact Status bodies are
compared in tests/integration/test_contract_cel.py. The rules' logic is also checked offline in
tests/unit/controllers/nodemaintenance/test_nodemaintenance_crd_schemas.py.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from nodeagent.kube.errors import Invalid
from nodeagent.kube.resources import EVICTIONREQUESTS, NODEMAINTENANCES, Obj
from nodeagent.manifests import crd_documents, crd_stream
from tests.clusters import TestCluster
from tests.conftest import Kubectl


def cel_messages(plural: str) -> dict[str, str]:
    """The messages of a CRD's CEL rules by their first word (stage, drainPlan, ...)."""
    (crd,) = [d for d in crd_documents() if d["spec"]["names"]["plural"] == plural]
    out: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations") or []:
                out[rule["message"].split()[0]] = rule["message"]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    return out


NM_RULES = cel_messages("nodemaintenances")
EVR_RULES = cel_messages("evictionrequests")
STAGE_RULE = NM_RULES["stage"]  # "stage may only move forward: Idle -> ..."


async def refused_by_cel(write: Callable[[], Awaitable[Obj]], message: str) -> None:
    """The write is refused: 422 with the CRD's CEL message."""
    with pytest.raises(Invalid) as refused:
        await write()
    assert refused.value.status == 422
    assert message in refused.value.message, refused.value.message


def nm_body(name: str, stage: str = "Idle", plan: list[dict[str, Any]] | None = None) -> Obj:
    spec: dict[str, Any] = {
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
            ]
        },
        "stage": stage,
    }
    if plan is not None:
        spec["drainPlan"] = plan
    return {"metadata": {"name": name}, "spec": spec}


NM_YAML = """
apiVersion: nodeagent.io/v1alpha1
kind: NodeMaintenance
metadata: {name: backwards}
spec:
  nodeSelector:
    nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  stage: STAGE
  reason: kernel
"""


# --- kubectl -----------------------------------------------------------------------------------


async def test_kubectl_applies_the_crds_and_serves_the_kinds(
    backend: TestCluster, kubectl: Kubectl
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nodeagent",
        "manifests",
        "crds",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0 and out.decode() == crd_stream()
    applied = await kubectl.ok("apply", "-f", "-", stdin=out.decode())
    assert "nodemaintenances.nodeagent.io created" in applied
    assert "evictionrequests.nodeagent.io created" in applied
    # a CRD is served once Established (at once on the sim, a moment later on kube-apiserver)
    await kubectl.ok(
        "wait",
        "--for=condition=Established",
        "crd/nodemaintenances.nodeagent.io",
        "crd/evictionrequests.nodeagent.io",
    )
    resources = await kubectl.ok("api-resources", "--api-group=nodeagent.io")
    rows = {line.split()[0]: line.split() for line in resources.splitlines()[1:]}
    assert rows["nodemaintenances"][1] == "nm"
    assert rows["evictionrequests"][1] == "evr"
    await kubectl.ok(
        "apply",
        "-f",
        "-",
        stdin="""
apiVersion: nodeagent.io/v1alpha1
kind: NodeMaintenance
metadata: {name: planned}
spec:
  nodeSelector:
    nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  reason: kernel
""",
    )
    listed = await kubectl.ok("get", "nm")
    header, row = listed.splitlines()
    assert header.split() == [
        *["NAME", "STAGE", "NODES", "PODS", "LEFT", "ENTRY", "BLOCKED", "BY", "DRAINED", "AGE"]
    ]
    assert row.split()[:2] == ["planned", "Idle"]  # no status: no controller runs here
    header, row = (await kubectl.ok("get", "nm", "-o", "wide")).splitlines()
    assert header.split()[-2:] == ["REASON", "AGE"]
    assert row.split()[2] == "kernel"
    bad = await kubectl.run(
        "patch", "nm", "planned", "--type=merge", "-p", '{"spec":{"stage":"Later"}}'
    )
    assert bad.code != 0 and "Unsupported value" in bad.err


async def test_acceptance_server_version_and_a_backward_stage_refused_by_cel(
    backend: TestCluster, kubectl: Kubectl
) -> None:
    """`kubectl version` names a v1.37 server (kube-apiserver built from k8s.io/kubernetes
    v1.37 on real); a NodeMaintenance applied again with its stage moved backwards is refused
    by kube-apiserver with the CRD's CEL message."""
    version = json.loads(await kubectl.ok("version", "-o", "json"))
    server = version["serverVersion"]["gitVersion"]
    assert server.startswith("v1.37."), server
    assert (server.endswith("-nodeagent-sim")) == (backend.kind == "sim"), server

    await backend.install_crds()
    await kubectl.ok("apply", "-f", "-", stdin=NM_YAML.replace("STAGE", "Drain"))
    back = await kubectl.run("apply", "-f", "-", stdin=NM_YAML.replace("STAGE", "Cordon"))
    stage = (await kubectl.ok("get", "nm", "backwards", "-o", "jsonpath={.spec.stage}")).strip()
    assert back.code != 0, back.out
    assert 'The NodeMaintenance "backwards" is invalid' in back.err, back.err
    assert f'spec.stage: Invalid value: "Cordon": {STAGE_RULE}' in back.err, back.err
    assert stage == "Drain"


# --- CEL rules, enforced by the API server -----------------------------------------------------


async def test_nodemaintenance_stage_only_moves_forward_and_the_plan_is_immutable(
    backend: TestCluster,
) -> None:
    await backend.install_crds()
    kube = backend.client()

    async def stage(name: str, to: str) -> Obj:
        return await kube.patch(NODEMAINTENANCES, name, {"spec": {"stage": to}})

    # forward moves, skipping stages too, are accepted on both servers
    await kube.create(NODEMAINTENANCES, nm_body("forward"))
    for to in ("Cordon", "Drain", "Complete"):
        assert (await stage("forward", to))["spec"]["stage"] == to
    await kube.create(NODEMAINTENANCES, nm_body("skip"))
    assert (await stage("skip", "Complete"))["spec"]["stage"] == "Complete"

    # moves backwards
    for name, first, to in (
        ("drain-to-cordon", "Drain", "Cordon"),
        ("complete-to-idle", "Complete", "Idle"),
        ("complete-to-drain", "Complete", "Drain"),
    ):
        await kube.create(NODEMAINTENANCES, nm_body(name, first))
        await refused_by_cel(functools.partial(stage, name, to), STAGE_RULE)

    # drainPlan: changed, added or removed after creation
    plan = [{"podPriority": 10, "podType": "Default"}]
    other = [{"podPriority": 20, "podType": "Default"}]
    await kube.create(NODEMAINTENANCES, nm_body("planned", plan=plan))
    await kube.create(NODEMAINTENANCES, nm_body("unplanned"))
    await kube.create(NODEMAINTENANCES, nm_body("dropped", plan=plan))
    for name, value in (("planned", other), ("unplanned", plan), ("dropped", None)):
        await refused_by_cel(
            functools.partial(kube.patch, NODEMAINTENANCES, name, {"spec": {"drainPlan": value}}),
            NM_RULES["drainPlan"],
        )
    # the same plan again, and other fields, may be written
    same = await kube.patch(
        NODEMAINTENANCES, "planned", {"spec": {"drainPlan": plan, "reason": "again"}}
    )
    assert same["spec"]["reason"] == "again"


UID = "6f1c2d8e-0b7a-4c1e-9d3f-2a5b8c7d9e01"


def evr_body(name: str = UID, uid: str = UID, requesters: list[str] | None = None) -> Obj:
    spec: dict[str, Any] = {"target": {"pod": {"name": "web", "uid": uid}}}
    if requesters is not None:
        spec["requesters"] = [{"name": r} for r in requesters]
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def test_evictionrequest_rules(backend: TestCluster) -> None:
    await backend.install_crds()
    kube = backend.client()

    async def create(body: Obj) -> Obj:
        return await kube.create(EVICTIONREQUESTS, body)

    # the name is the pod's UID; the first write names a requester
    other = "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"
    await refused_by_cel(
        lambda: create(evr_body(name=other, requesters=["nodemaintenance.k8s.io"])),
        EVR_RULES["metadata.name"],
    )
    await refused_by_cel(
        lambda: create(evr_body(name=UID[:-1] + "2", uid=UID[:-1] + "2")),
        EVR_RULES["at"],
    )

    # a valid request; its requesters may all go later (that cancels it)
    await create(evr_body(requesters=["nodemaintenance.k8s.io"]))
    emptied = await kube.patch(EVICTIONREQUESTS, UID, {"spec": {"requesters": []}}, "default")
    assert emptied["spec"]["requesters"] == []

    # the target is immutable
    moved = {"spec": {"target": {"pod": {"name": "db", "uid": UID}}}}
    await refused_by_cel(
        lambda: kube.patch(EVICTIONREQUESTS, UID, moved, "default"),
        EVR_RULES["target"],
    )

    # targetInterceptors: set once, then neither changed nor removed
    first = [{"name": "kubelet.k8s.io"}, {"name": "imperative-eviction.k8s.io"}]
    status = await kube.patch_status(
        EVICTIONREQUESTS, UID, {"status": {"targetInterceptors": first}}, "default"
    )
    assert status["status"]["targetInterceptors"] == first
    for value in ([{"name": "imperative-eviction.k8s.io"}], None):
        await refused_by_cel(
            functools.partial(
                kube.patch_status,
                EVICTIONREQUESTS,
                UID,
                {"status": {"targetInterceptors": value}},
                "default",
            ),
            EVR_RULES["targetInterceptors"],
        )
    # the rest of the status moves on
    active = await kube.patch_status(
        EVICTIONREQUESTS, UID, {"status": {"activeInterceptors": ["kubelet.k8s.io"]}}, "default"
    )
    assert active["status"]["targetInterceptors"] == first


async def test_evictionrequest_heartbeats_only_from_the_active_interceptor_60s_apart(
    backend: TestCluster,
) -> None:
    await backend.install_crds()
    kube = backend.client()
    await kube.create(EVICTIONREQUESTS, evr_body(requesters=["nodemaintenance.k8s.io"]))
    t0 = "2026-11-24T10:00:00Z"

    def entry(name: str, beat: str, message: str = "working") -> Obj:
        return {"name": name, "startTime": t0, "heartbeatTime": beat, "message": message}

    async def report(*entries: Obj) -> Obj:
        return await kube.patch_status(
            EVICTIONREQUESTS, UID, {"status": {"interceptors": list(entries)}}, "default"
        )

    await kube.patch_status(
        EVICTIONREQUESTS,
        UID,
        {
            "status": {
                "targetInterceptors": [
                    {"name": "kubelet.k8s.io"},
                    {"name": "imperative-eviction.k8s.io"},
                ],
                "activeInterceptors": ["kubelet.k8s.io"],
            }
        },
        "default",
    )
    first = await report(entry("kubelet.k8s.io", t0))  # the active one starts
    assert first["status"]["interceptors"][0]["heartbeatTime"] == t0
    rule = EVR_RULES["interceptors[].heartbeatTime:"]
    # an interceptor whose turn it is not may not heartbeat, not even a first time
    await refused_by_cel(
        lambda: report(entry("kubelet.k8s.io", t0), entry("imperative-eviction.k8s.io", t0)),
        rule,
    )
    # the active one: not sooner than 60 s after its last heartbeat, never backwards
    for too_soon in ("2026-11-24T10:00:59Z", "2026-11-24T09:59:00Z"):
        await refused_by_cel(functools.partial(report, entry("kubelet.k8s.io", too_soon)), rule)
    # its message may change between heartbeats; the next heartbeat 60 s on goes through
    await report(entry("kubelet.k8s.io", t0, "half way"))
    later = await report(entry("kubelet.k8s.io", "2026-11-24T10:01:00Z", "nearly done"))
    assert later["status"]["interceptors"][0]["heartbeatTime"] == "2026-11-24T10:01:00Z"
