"""What kube-apiserver v1.37 enforces on `lifecycle.k8s.io/v1alpha1` (gate EvictionRequestAPI),
pinned on both backends (the simulated cluster serves the group as the real server does): the
requests' reserved names, immutable target and intents; the pods' reserved responder
priorities; status written only through its subresource; bodies of the wrong shape; what
kubectl sees (resources, printed columns); and the Eviction status state machine, each case
run both on the server and on its Python port (nodeagent_testbed.sim.lifecycle_rules, which
the simulated server enforces), which must agree."""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import BadRequest, Invalid
from nodeagent.kube.resources import EVICTIONS, UPSTREAM_EVICTIONREQUESTS
from nodeagent.model.names import IMPERATIVE_RESPONDER
from nodeagent.model.times import format_time
from nodeagent_testbed.sim.lifecycle_rules import refusals
from tests.clusters import TestCluster, create_pod
from tests.conftest import Kubectl

# the simulated cluster serves lifecycle.k8s.io for these (the real control plane always does)
pytestmark = pytest.mark.lifecycle_api

Obj = dict[str, Any]
MOVER, KEEPER = "acme.io/mover", "zeta.io/keeper"


@dataclass
class Env:
    admin: KubeClient
    pod: Obj


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    admin = backend.client()
    pod = await create_pod(
        admin,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "default"},
            "spec": {
                "nodeName": "node-1",
                "evictionResponders": [
                    {"name": MOVER, "priority": 10000},
                    {"name": KEEPER, "priority": 20000},
                ],
                "containers": [{"name": "c", "image": "busybox"}],
            },
        },
    )
    yield Env(admin, pod)


def request_body(env: Env, name: str, requester: str, intent: str = "Eviction") -> Obj:
    md = env.pod["metadata"]
    return {
        "apiVersion": "lifecycle.k8s.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "target": {"pod": {"name": md["name"], "uid": md["uid"]}},
            "requester": requester,
            "intent": intent,
        },
    }


async def refused(kube_call: Any) -> str:
    with pytest.raises(Invalid) as e:
        await kube_call
    return str(e.value)


# -- requests and pods ---------------------------------------------------------------------------


async def test_requesters_in_kubernetes_domains_are_refused(env: Env) -> None:
    body = request_body(env, "r", "nodemaintenance.k8s.io")
    message = await refused(env.admin.create(UPSTREAM_EVICTIONREQUESTS, body))
    assert "domain names *.k8s.io, *.kubernetes.io are reserved" in message
    assert "must include a prefix" in message  # a requester is a domain-prefixed key
    await env.admin.create(UPSTREAM_EVICTIONREQUESTS, request_body(env, "ok", "acme.io/drainer"))


async def test_a_requests_target_is_immutable_its_intent_an_enum(env: Env) -> None:
    await env.admin.create(UPSTREAM_EVICTIONREQUESTS, request_body(env, "r", "acme.io/drainer"))
    retarget = {"spec": {"target": {"pod": {"name": "other"}}}}
    message = await refused(env.admin.patch(UPSTREAM_EVICTIONREQUESTS, "r", retarget, "default"))
    assert "spec.target" in message and "immutable" in message
    bad = {"spec": {"intent": "Maybe"}}
    message = await refused(env.admin.patch(UPSTREAM_EVICTIONREQUESTS, "r", bad, "default"))
    assert 'supported values: "Eviction", "Withdrawn"' in message
    withdrawn = {"spec": {"intent": "Withdrawn"}}
    await env.admin.patch(UPSTREAM_EVICTIONREQUESTS, "r", withdrawn, "default")


async def test_pods_may_not_name_reserved_responders_or_priorities(env: Env) -> None:
    pod = copy.deepcopy(env.pod)
    pod["metadata"] = {"name": "web-1", "namespace": "default"}
    pod["spec"]["evictionResponders"] = [{"name": "mover.k8s.io/x", "priority": 10}]
    message = await refused(create_pod(env.admin, pod))
    assert "domain names *.k8s.io, *.kubernetes.io are reserved" in message
    assert "priorities 0-999 are reserved" in message


async def test_status_is_written_only_through_its_subresource(env: Env) -> None:
    body = request_body(env, "r", "acme.io/drainer")
    body["status"] = {"observedGeneration": 7}
    created = await env.admin.create(UPSTREAM_EVICTIONREQUESTS, body)
    assert created["status"] == {}  # reset on create
    await env.admin.patch_status(
        UPSTREAM_EVICTIONREQUESTS, "r", {"status": {"observedGeneration": 1}}, "default"
    )
    patched = await env.admin.patch(
        UPSTREAM_EVICTIONREQUESTS, "r", {"status": {"observedGeneration": 5}}, "default"
    )
    assert patched["status"] == {"observedGeneration": 1}  # the main resource keeps it
    message = await refused(
        env.admin.patch_status(
            UPSTREAM_EVICTIONREQUESTS, "r", {"status": {"observedGeneration": 0}}, "default"
        )
    )
    assert "status.observedGeneration" in message


async def test_bodies_of_the_wrong_shape_are_refused_naming_the_field(env: Env) -> None:
    body = request_body(env, "r", "acme.io/drainer")
    body["spec"]["target"]["pod"]["name"] = 5
    with pytest.raises(BadRequest) as e:  # the decoder's error, before any validation
        await env.admin.create(UPSTREAM_EVICTIONREQUESTS, body)
    assert "spec.target.pod.name" in str(e.value)
    eviction = await env.admin.create(EVICTIONS, eviction_body(env))
    name = eviction["metadata"]["name"]
    wrong = {"status": {"targetResponders": "all of them"}}
    message = await refused(env.admin.patch_status(EVICTIONS, name, wrong, "default"))
    assert "status.targetResponders" in message
    missing = {"spec": {"target": {"pod": {"name": "web-0", "uid": None}}}}
    message = await refused(env.admin.create(EVICTIONS, {**eviction_body(env), **missing}))
    assert "spec.target.pod.uid: Required value" in message


async def test_kubectl_sees_the_servers_resources_and_columns(env: Env, kubectl: Kubectl) -> None:
    served = await kubectl.ok("api-resources", "--api-group=lifecycle.k8s.io", "-o", "name")
    assert served.split() == ["evictionrequests.lifecycle.k8s.io", "evictions.lifecycle.k8s.io"]
    await env.admin.create(UPSTREAM_EVICTIONREQUESTS, request_body(env, "r", "acme.io/drainer"))
    eviction = await env.admin.create(EVICTIONS, eviction_body(env))
    status = {**first(now()), "observedGeneration": 1}
    status["requesters"] = [{"name": "acme.io/drainer", "intent": "Eviction"}]
    name = eviction["metadata"]["name"]
    await env.admin.patch_status(EVICTIONS, name, {"status": status}, "default")

    header, row = (await kubectl.ok("get", "evictionrequests")).splitlines()
    assert columns(header) == [
        "NAME", "TARGET", "TARGET TYPE", "STATUS", "REQUESTER", "INTENT", "AGE",
    ]  # fmt: skip
    assert columns(row)[:6] == ["r", "web-0", "Pod", "Pending", "acme.io/drainer", "Eviction"]
    header, row = (await kubectl.ok("get", "evictions", "-o", "wide")).splitlines()
    assert columns(header) == [
        "NAME", "TARGET", "TARGET TYPE", "STATUS", "ACTIVE RESPONDER", "RESPONDER STATUS",
        "RESPONDER EXPECTED FINISH", "REQUESTERS", "AGE", "RESPONDER HEARTBEAT",
        "RESPONDER STATUS MESSAGE",
    ]  # fmt: skip
    cells = columns(row)
    assert cells[:5] == [name, "web-0", "Pod", "Progressing", f"{KEEPER} (1/3)"]
    assert re.fullmatch(r"Started \(\d+s ago\)", cells[5]), cells
    assert cells[6:8] + cells[9:] == ["<unknown>", "acme.io/drainer", "<unset>", "<unset>"]


def columns(line: str) -> list[str]:
    """kubectl's cells of one line (cells have no two spaces in a row)."""
    return re.split(r"\s{2,}", line.strip())


# -- the Eviction's status -------------------------------------------------------------------------


def targets(mover: str, keeper: str, evictor: str = "Inactive") -> list[Obj]:
    return [
        {"name": MOVER, "priority": 10000, "state": mover},
        {"name": KEEPER, "priority": 20000, "state": keeper},
        {"name": IMPERATIVE_RESPONDER, "priority": 100, "state": evictor},
    ]


def progress(**entries: Obj) -> list[Obj]:
    names = {"mover": MOVER, "keeper": KEEPER, "evictor": IMPERATIVE_RESPONDER}
    return [{"name": names[k], **v} for k, v in entries.items()]


def now() -> str:
    return format_time(datetime.now(UTC))


def first(keeper_start: str) -> Obj:
    """A correct first status: the highest priority Active, started now."""
    return {
        "targetResponders": targets("Inactive", "Active"),
        "responders": progress(mover={}, keeper={"startTime": keeper_start}, evictor={}),
    }


CASES: dict[str, Any] = {
    "two Active at once": lambda t: [
        {
            "targetResponders": targets("Active", "Active"),
            "responders": progress(mover={"startTime": t}, keeper={"startTime": t}, evictor={}),
        }
    ],
    "the lower priority first": lambda t: [
        {
            "targetResponders": targets("Active", "Inactive"),
            "responders": progress(mover={"startTime": t}, keeper={}, evictor={}),
        }
    ],
    "Active without a start": lambda t: [
        {
            "targetResponders": targets("Inactive", "Active"),
            "responders": progress(mover={}, keeper={}, evictor={}),
        }
    ],
    "interrupted before its heartbeat lapsed": lambda t: [
        first(t),
        {
            "targetResponders": targets("Active", "Interrupted"),
            "responders": progress(mover={"startTime": t}, keeper={"startTime": t}, evictor={}),
        },
    ],
    "Completed without completionTime": lambda t: [
        first(t),
        {
            "targetResponders": targets("Active", "Completed"),
            "responders": progress(mover={"startTime": t}, keeper={"startTime": t}, evictor={}),
        },
    ],
    "responders' keys changed": lambda t: [
        first(t),
        {
            "targetResponders": targets("Inactive", "Active")[1:],
            "responders": progress(keeper={"startTime": t}, evictor={}),
        },
    ],
    "a reserved priority": lambda t: [
        {
            "targetResponders": [
                {"name": KEEPER, "priority": 500, "state": "Active"},
                {"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Inactive"},
            ],
            "responders": progress(keeper={"startTime": t}, evictor={}),
        }
    ],
    "a final condition reverted": lambda t: [
        {"conditions": [_cond("Failed", "True", "CanceledDueToNoRequesters", t)]},
        {"conditions": [_cond("Failed", "False", "AwaitingEviction", t)]},
    ],
}

ACCEPTED: dict[str, Any] = {
    "the highest priority first": lambda t: [first(t)],
    "handed on after completion": lambda t: [
        first(t),
        {
            "targetResponders": targets("Inactive", "Active"),
            "responders": progress(
                mover={},
                keeper={"startTime": t, "heartbeatTime": t, "completionTime": t},
                evictor={},
            ),
        },
        {
            "targetResponders": targets("Active", "Completed"),
            "responders": progress(
                mover={"startTime": t},
                keeper={"startTime": t, "heartbeatTime": t, "completionTime": t},
                evictor={},
            ),
        },
    ],
    "canceled at once when ended": lambda t: [
        first(t),
        {
            "conditions": [_cond("Failed", "True", "CanceledDueToNoRequesters", t)],
            "targetResponders": targets("Inactive", "Canceled"),
            "responders": progress(mover={}, keeper={"startTime": t}, evictor={}),
        },
    ],
}


def _cond(type_: str, status: str, reason: str, t: str) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": reason,
        "lastTransitionTime": t,
    }


def eviction_body(env: Env) -> Obj:
    md = env.pod["metadata"]
    return {
        "apiVersion": "lifecycle.k8s.io/v1alpha1",
        "kind": "Eviction",
        "metadata": {"generateName": "case-", "namespace": "default"},
        "spec": {"target": {"pod": {"name": md["name"], "uid": md["uid"]}}},
    }


async def _run(env: Env, steps: list[Obj]) -> tuple[bool, list[str]]:
    """Each status in turn on a new Eviction: whether the server took the last, and the port's
    verdict on it (all before it must pass both)."""
    eviction = await env.admin.create(EVICTIONS, eviction_body(env))
    name = eviction["metadata"]["name"]
    old: Obj = {}
    for i, status in enumerate(steps):
        port = refusals(old, status, datetime.now(UTC))
        patch = {"status": {"conditions": None, **status}}
        try:
            written = await env.admin.patch_status(EVICTIONS, name, patch, "default")
        except Invalid as e:
            assert i == len(steps) - 1, f"step {i} refused: {e}"
            return False, port
        assert i == len(steps) - 1 or port == [], f"the port refuses step {i}: {port}"
        old = written["status"]
    return True, port


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_server_and_the_port_refuse(env: Env, case: str) -> None:
    taken, port = await _run(env, CASES[case](now()))
    assert not taken, f"{case}: the server took it"
    assert port, f"{case}: the server refused it, the port would not"


@pytest.mark.parametrize("case", sorted(ACCEPTED))
async def test_the_server_and_the_port_accept(env: Env, case: str) -> None:
    taken, port = await _run(env, ACCEPTED[case](now()))
    assert taken and port == [], port
