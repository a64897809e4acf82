"""packaging/kubernetes/eviction-bridge agrees with the code: the names the bridge looks for,
its path and port, what it asks of RBAC, and the webhook's safety settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from nodeagent.controllers.bridge.certstore import (
    SECRET,
    SERVICE,
    WEBHOOK_CONFIGURATION,
    TLSPlace,
)
from nodeagent.controllers.bridge.server import Listen
from nodeagent.controllers.bridge.webhook import PATH, WRITE_TIMEOUT

BRIDGE = Path(__file__).resolve().parents[4] / "packaging" / "kubernetes" / "eviction-bridge"
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


def test_the_webhook_calls_the_bridge_where_it_listens() -> None:
    config = one("ValidatingWebhookConfiguration")
    assert config["metadata"]["name"] == WEBHOOK_CONFIGURATION
    (webhook,) = config["webhooks"]
    service = webhook["clientConfig"]["service"]
    assert (service["name"], service["namespace"], service["path"]) == (SERVICE, NAMESPACE, PATH)
    svc = one("Service")
    assert svc["metadata"]["name"] == SERVICE
    (port,) = svc["spec"]["ports"]
    assert port["port"] == service["port"] and port["targetPort"] == "bridge"
    assert Listen().port == 8443  # the container port `bridge` the Deployment must declare
    # the serving certificate is for the names the API server calls it by
    assert f"{SERVICE}.{NAMESPACE}.svc" in TLSPlace.shipped(NAMESPACE).names


def test_the_webhook_never_blocks_a_drain_and_writes_nothing_on_a_dry_run() -> None:
    (webhook,) = one("ValidatingWebhookConfiguration")["webhooks"]
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["sideEffects"] == "NoneOnDryRun"
    assert WRITE_TIMEOUT < webhook["timeoutSeconds"] <= 10
    (rule,) = webhook["rules"]
    assert (rule["resources"], rule["operations"]) == (["pods/eviction"], ["CREATE"])
    assert "objectSelector" not in webhook  # matched against the Eviction's labels: none


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
