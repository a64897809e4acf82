"""packaging/kubernetes/eviction-bridge agrees with the code: the names the bridge looks for,
its path and port, what it asks of RBAC, and the webhook's safety settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from nodeagent.bridge.certstore import (
    SECRET,
    SERVICE,
    WEBHOOK_CONFIGURATION,
    TLSPlace,
)
from nodeagent.bridge.maintenances import PATH as MAINTENANCES_PATH
from nodeagent.bridge.server import Listen
from nodeagent.bridge.webhook import PATH, WRITE_TIMEOUT

EVICTIONS_HOOK = "eviction-bridge.nodeagent.io"
MAINTENANCES_HOOK = "nodemaintenance-warning.nodeagent.io"
BRIDGE = Path(__file__).resolve().parents[3] / "packaging" / "kubernetes" / "eviction-bridge"
NAMESPACE = "nodeagent-system"


def documents() -> list[dict[str, Any]]:
    """The bridge's own objects (its component's resources)."""
    kustomization = yaml.safe_load((BRIDGE / "kustomization.yaml").read_text())
    return [
        doc
        for name in kustomization["resources"]
        for doc in yaml.safe_load_all((BRIDGE / name).read_text())
        if doc
    ]


def one(kind: str) -> dict[str, Any]:
    (found,) = [d for d in documents() if d["kind"] == kind]
    return found


def webhook(name: str) -> dict[str, Any]:
    hooks: list[dict[str, Any]] = one("ValidatingWebhookConfiguration")["webhooks"]
    (found,) = [w for w in hooks if w["name"] == name]
    return found


def test_the_webhooks_call_the_bridge_where_it_listens() -> None:
    config = one("ValidatingWebhookConfiguration")
    assert config["metadata"]["name"] == WEBHOOK_CONFIGURATION
    paths = {w["name"]: w["clientConfig"]["service"]["path"] for w in config["webhooks"]}
    assert paths == {EVICTIONS_HOOK: PATH, MAINTENANCES_HOOK: MAINTENANCES_PATH}
    service = webhook(EVICTIONS_HOOK)["clientConfig"]["service"]
    assert (service["name"], service["namespace"]) == (SERVICE, NAMESPACE)
    assert webhook(MAINTENANCES_HOOK)["clientConfig"]["service"] == service | {
        "path": MAINTENANCES_PATH
    }
    svc = one("Service")
    assert svc["metadata"]["name"] == SERVICE
    (port,) = svc["spec"]["ports"]
    assert port["port"] == service["port"] and port["targetPort"] == "bridge"
    assert Listen().port == 8443  # the container port `bridge` the Deployment must declare
    # the serving certificate is for the names the API server calls it by
    assert f"{SERVICE}.{NAMESPACE}.svc" in TLSPlace.shipped(NAMESPACE).names


def test_the_webhook_never_blocks_a_drain_and_writes_nothing_on_a_dry_run() -> None:
    hook = webhook(EVICTIONS_HOOK)
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert WRITE_TIMEOUT < hook["timeoutSeconds"] <= 10
    (rule,) = hook["rules"]
    assert (rule["resources"], rule["operations"]) == (["pods/eviction"], ["CREATE"])
    assert "objectSelector" not in hook  # matched against the Eviction's labels: none


def test_the_maintenance_warning_never_holds_a_maintenance_nor_a_shutdown() -> None:
    """Ignore: it only warns (authorization is the base's policy, failing closed); the node
    agents' shutdown maintenances are not sent to it at all."""
    hook = webhook(MAINTENANCES_HOOK)
    assert (hook["failurePolicy"], hook["sideEffects"]) == ("Ignore", "None")
    assert hook["timeoutSeconds"] <= 2
    (rule,) = hook["rules"]
    assert (rule["apiGroups"], rule["resources"]) == (["nodeagent.io"], ["nodemaintenances"])
    assert rule["operations"] == ["CREATE", "UPDATE"]
    conditions = {c["name"]: c["expression"] for c in hook["matchConditions"]}
    policy = next(
        d
        for d in yaml.safe_load_all((BRIDGE.parent / "nodemaintenance-policy.yaml").read_text())
        if d and d["kind"] == "ValidatingAdmissionPolicy"
    )
    base = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    # the same users left out as the authorization policy leaves out
    assert " ".join(conditions["not-nodeagent"].split()) == " ".join(base["not-nodeagent"].split())
    assert conditions["selects-anew"] == base["selects-anew"]


def test_rbac_names_the_secret_and_the_configuration() -> None:
    role = one("Role")
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [SECRET],
            "verbs": ["get", "list", "watch", "update"],
        }
    ]
    rule, namespaces = one("ClusterRole")["rules"]
    assert rule["resourceNames"] == [WEBHOOK_CONFIGURATION]
    assert set(rule["verbs"]) == {"get", "patch"}
    # the namespaces that opted out, read only
    assert (namespaces["resources"], set(namespaces["verbs"])) == (
        ["namespaces"],
        {"list", "watch"},
    )
    for binding in ("RoleBinding", "ClusterRoleBinding"):
        (subject,) = one(binding)["subjects"]
        assert (subject["name"], subject["namespace"]) == ("nodeagent-controllers", NAMESPACE)
