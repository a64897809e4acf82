"""The Helm chart packaging/helm/nodeagent, with real `helm` (v3, pinned in scripts/helm/go.mod,
the `helm` fixture of conftest.py beside this file).

What they check: `helm lint --strict` passes with the default values and with every toggle on;
`helm template --include-crds` with the default values into `nodeagent-system` renders exactly
the objects of packaging/kubernetes (same kinds and names, each object equal field by field,
the ConfigMaps' configurations equal once parsed), but the Namespace, which the chart makes only
with `namespace.create`; in another namespace every namespaced object, RBAC subject, the
admission policy's ServiceAccount and the Lease's namespace follow the release; the values for
image, resources, scheduling and configuration land where they should and the configurations
stay valid; the monitoring objects are off by default and, on, equal packaging/monitoring's;
the chart's CRD copy is current. Every object the templates make carries Helm's standard
labels (helm.sh/chart, app.kubernetes.io/instance, managed-by, version; stripped before the
comparison with packaging/kubernetes, which has none), the selectors are those of the chart's
first version (immutable), fullnameOverride renames every object and every reference to one
(ServiceAccounts in the policies' CEL, RBAC subjects, mounted ConfigMaps) but the bridge's
names the code fixes, the pod values (imagePullSecrets, podAnnotations, podLabels, affinity,
extraEnv) land, and values.schema.json types every value and makes helm refuse values that
break it.

What they do not: render with values other than those set here. Installing the chart on a
server (`helm install`, `helm upgrade`, `helm uninstall`) is test_helm_install.py's."""

from __future__ import annotations

import copy
import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from nodeagent import config as agent_config
from nodeagent.bridge.certs import service_names
from nodeagent.bridge.certstore import SECRET, SERVICE, WEBHOOK_CONFIGURATION
from nodeagent.manifests import crd_stream
from tests.integration.packaging.test_kubernetes_manifests import (
    K8S,
    base_manifests,
    kustomized,
    manifests,
)

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "packaging" / "helm" / "nodeagent"
MONITORING = ROOT / "packaging" / "monitoring"
NAMESPACE = "nodeagent-system"
TOGGLES = [
    "monitoring.podMonitor.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.grafanaDashboard.enabled=true",
    "namespace.create=true",
    "evictionBridge.enabled=true",
]
Doc = dict[str, Any]
RELEASE = "nodeagent"
CHART_META = yaml.safe_load((CHART / "Chart.yaml").read_text())
HELM_LABELS = {
    "helm.sh/chart": f"nodeagent-{CHART_META['version']}",
    "app.kubernetes.io/instance": RELEASE,
    "app.kubernetes.io/managed-by": "Helm",
    "app.kubernetes.io/version": str(CHART_META["appVersion"]),
}
# the eviction bridge's names fixed by the controllers' code (certstore.py) and kept by its
# other objects (templates/_helpers.tpl)
BRIDGE_PREFIX = "nodeagent-eviction-bridge"


def run_helm(helm: Path, *args: str) -> str:
    done = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


@functools.cache
def _render(helm: Path, namespace: str, sets: tuple[str, ...]) -> tuple[Doc, ...]:
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, "--include-crds"]
    for s in sets:
        args += ["--set", s]
    return tuple(d for d in yaml.safe_load_all(run_helm(helm, *args)) if d)


def render(helm: Path, namespace: str = NAMESPACE, *sets: str) -> list[Doc]:
    """The rendered objects (copies: change them at will)."""
    return copy.deepcopy(list(_render(helm, namespace, sets)))


def key(doc: Doc) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def by_key(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
    out = {key(d): d for d in docs}
    assert len(out) == len(docs), "two objects of one kind and name"
    return out


def parsed_configs(doc: Doc) -> Doc:
    """A ConfigMap with its config.yaml parsed (comments and key order do not count)."""
    if doc["kind"] == "ConfigMap" and "config.yaml" in doc.get("data", {}):
        doc = copy.deepcopy(doc)
        doc["data"]["config.yaml"] = yaml.safe_load(doc["data"]["config.yaml"])
    return doc


def without_helm_labels(doc: Doc) -> Doc:
    """The object without Helm's standard labels, which every object of the templates must
    carry (the CRDs of crds/ are copied as they are, with none)."""
    doc = copy.deepcopy(doc)
    if doc["kind"] == "CustomResourceDefinition":
        return doc
    labels = doc["metadata"].get("labels", {})
    for name, value in HELM_LABELS.items():
        assert labels.pop(name, None) == value, f"{key(doc)}: label {name}"
    return doc


def comparable(doc: Doc) -> Doc:
    return parsed_configs(without_helm_labels(doc))


def agent_configs(docs: list[Doc]) -> dict[str, agent_config.Config]:
    return {
        d["metadata"]["name"]: agent_config.from_mapping(
            yaml.safe_load(d["data"]["config.yaml"]), d["metadata"]["name"]
        )
        for d in docs
        if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})
    }


def pod_spec(docs: list[Doc], kind: str, name: str) -> Doc:
    spec: Doc = by_key(docs)[(kind, name)]["spec"]["template"]["spec"]
    return spec


# --- without helm ------------------------------------------------------------------------


def test_chart_crds_copy_is_current() -> None:
    """crds/crds.yaml is the generated copy of the CRDs (Helm reads no file outside the chart)."""
    lines = (CHART / "crds" / "crds.yaml").read_text().splitlines(keepends=True)
    header, body = lines[:3], "".join(lines[3:])
    assert all(line.startswith("#") for line in header)
    assert body == crd_stream(), (
        "packaging/helm/nodeagent/crds/crds.yaml is stale; regenerate it with the command in "
        "its header"
    )


def test_chart_version_is_the_agents() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    daemonset = by_key(list(manifests()))[("DaemonSet", "nodeagent")]
    image = daemonset["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"{values['image']['repository']}:{values['image']['tag']}"
    assert chart["appVersion"] == values["image"]["tag"]


# --- helm lint and helm template -----------------------------------------------------------


def test_helm_lint(helm: Path) -> None:
    run_helm(helm, "lint", "--strict", str(CHART))
    run_helm(helm, "lint", "--strict", str(CHART), *(a for s in TOGGLES for a in ("--set", s)))


def test_defaults_render_the_kustomize_objects(helm: Path) -> None:
    ours = by_key(render(helm))
    theirs = by_key([d for d in base_manifests() if d["kind"] != "Namespace"])
    assert sorted(ours) == sorted(theirs)
    for k, doc in theirs.items():
        assert comparable(ours[k]) == parsed_configs(doc), f"{k} differs"


def test_the_eviction_bridge_renders_its_kustomize_component(helm: Path) -> None:
    """evictionBridge.enabled: the objects of packaging/kubernetes/eviction-bridge (its
    component over the base), the controllers' configuration with the bridge on."""
    ours = by_key(render(helm, NAMESPACE, "evictionBridge.enabled=true"))
    theirs = by_key([d for d in manifests() if d["kind"] != "Namespace"])
    assert sorted(ours) == sorted(theirs)
    for k, doc in theirs.items():
        assert comparable(ours[k]) == parsed_configs(doc), f"{k} differs"
    # the bridge's settings beside it, and its port, follow the values
    docs = render(
        helm,
        NAMESPACE,
        "evictionBridge.enabled=true",
        "evictionBridge.port=9443",
        "controllers.config.eviction.bridge.daemonSetPods=true",
        "controllers.config.eviction.heartbeatDeadline=300",
    )
    cfg = agent_configs(docs)["nodeagent-controllers-config"]
    assert cfg.eviction.bridge.enabled and cfg.eviction.bridge.port == 9443
    assert cfg.eviction.bridge.daemon_set_pods and cfg.eviction.heartbeat_deadline == 300
    (container,) = pod_spec(docs, "Deployment", "nodeagent-controllers")["containers"]
    assert {"name": "bridge", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    # off (the default): none of its objects, its port closed
    bridge_objects = set(theirs) - {key(d) for d in base_manifests()}
    assert ("ValidatingWebhookConfiguration", "nodeagent-eviction-bridge") in bridge_objects
    assert not bridge_objects & set(by_key(render(helm)))
    assert not agent_configs(render(helm))["nodeagent-controllers-config"].eviction.bridge.enabled


def test_cert_manager_keeps_the_bridges_certificate_on_request(helm: Path) -> None:
    on = ("evictionBridge.enabled=true", "evictionBridge.certManager.enabled=true")
    docs = by_key(render(helm, "ops", *on))
    cfg = agent_configs(list(docs.values()))["nodeagent-controllers-config"]
    assert cfg.eviction.bridge.certificates == "provided"
    assert cfg.eviction.bridge.webhook_configuration == WEBHOOK_CONFIGURATION  # its ca.crt
    cert = docs[("Certificate", "nodeagent-eviction-bridge")]
    assert cert["metadata"]["namespace"] == "ops"
    assert cert["spec"]["secretName"] == SECRET
    assert tuple(cert["spec"]["dnsNames"]) == service_names(SERVICE, "ops")
    assert cert["spec"]["issuerRef"] == {"name": "nodeagent-eviction-bridge-ca", "kind": "Issuer"}
    ca = docs[("Certificate", "nodeagent-eviction-bridge-ca")]
    assert ca["spec"]["isCA"] is True
    assert docs[("Issuer", "nodeagent-eviction-bridge-ca")]["spec"]["ca"] == {
        "secretName": ca["spec"]["secretName"]
    }
    assert docs[("Issuer", "nodeagent-eviction-bridge-selfsigned")]["spec"] == {"selfSigned": {}}
    # an issuer of yours: no CA of the chart's
    yours = by_key(
        render(
            helm,
            "ops",
            *on,
            "evictionBridge.certManager.issuerRef.name=corp-ca",
            "evictionBridge.certManager.issuerRef.kind=ClusterIssuer",
        )
    )
    issuer = yours[("Certificate", "nodeagent-eviction-bridge")]["spec"]["issuerRef"]
    assert issuer == {"name": "corp-ca", "kind": "ClusterIssuer"}
    assert not [k for k in yours if k[0] == "Issuer" or k[1] == "nodeagent-eviction-bridge-ca"]
    # off (the default): the controllers keep it
    managed = agent_configs(render(helm, "ops", "evictionBridge.enabled=true"))
    assert managed["nodeagent-controllers-config"].eviction.bridge.certificates == "managed"


def test_cert_manager_renders_its_kustomize_component(helm: Path, tmp_path: Path) -> None:
    """evictionBridge.certManager.enabled: what kustomize builds of the base with the
    eviction-bridge and eviction-bridge-cert-manager components, field by field."""
    built = kustomized(tmp_path, K8S / "eviction-bridge", K8S / "eviction-bridge-cert-manager")
    theirs = by_key([d for d in built if d["kind"] != "Namespace"])
    on = ("evictionBridge.enabled=true", "evictionBridge.certManager.enabled=true")
    ours = by_key(render(helm, NAMESPACE, *on))
    assert sorted(ours) == sorted(theirs)
    for k, doc in theirs.items():
        assert comparable(ours[k]) == parsed_configs(doc), f"{k} differs"


def test_namespace_only_on_request(helm: Path) -> None:
    assert not [d for d in render(helm) if d["kind"] == "Namespace"]
    (made,) = [
        d for d in render(helm, NAMESPACE, "namespace.create=true") if d["kind"] == "Namespace"
    ]
    assert without_helm_labels(made) == by_key(list(manifests()))[("Namespace", NAMESPACE)]


def test_another_namespace_is_followed_everywhere(helm: Path) -> None:
    docs = render(helm, "ops", *TOGGLES)
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
    }
    for doc in docs:
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["name"] == "ops"
        elif doc["kind"] in cluster_scoped:
            assert "namespace" not in doc["metadata"]
        else:
            assert doc["metadata"]["namespace"] == "ops", key(doc)
        for subject in doc.get("subjects", []):
            if subject["kind"] == "ServiceAccount":
                assert subject["namespace"] == "ops"
    # nothing names the default namespace any more (the dashboard's text aside)
    text = json.dumps([d for d in docs if key(d) != ("ConfigMap", "nodeagent-dashboard")])
    assert NAMESPACE not in text
    policy = by_key(docs)[("ValidatingAdmissionPolicy", "nodeagent-node-restriction")]
    assert (
        "'system:serviceaccount:ops:nodeagent'"
        in policy["spec"]["matchConditions"][0]["expression"]
    )
    controllers = agent_configs(docs)["nodeagent-controllers-config"]
    assert controllers.leader.namespace == "ops"
    # the webhook calls the Service in the release's namespace, where the bridge's
    # certificate names it (TLSPlace.shipped(leader.namespace))
    webhook = by_key(docs)[("ValidatingWebhookConfiguration", "nodeagent-eviction-bridge")]
    assert webhook["webhooks"][0]["clientConfig"]["service"]["namespace"] == "ops"
    assert controllers.leader.lease_name == "nodeagent-controllers"


def test_values_land_where_they_should(helm: Path) -> None:
    docs = render(
        helm,
        NAMESPACE,
        "image.repository=registry.example/na",
        "image.tag=9.9.9",
        "image.pullPolicy=Always",
        "nodeAgent.resources.limits.memory=1Gi",
        "nodeAgent.nodeSelector.kubernetes\\.io/os=linux",
        "nodeAgent.tolerations[0].key=dedicated",
        "nodeAgent.tolerations[0].operator=Exists",
        "nodeAgent.config.shutdown.budget=900",
        "controllers.replicas=3",
        "controllers.nodeSelector.role=infra",
        "controllers.tolerations[0].key=infra",
        "controllers.tolerations[0].operator=Exists",
        "controllers.config.eviction.heartbeatDeadline=300",
        "leaderElection.leaseName=other-lease",
        "metricsPort=9999",
        "nodeAgent.config.observability.listen=0.0.0.0:9999",
        "controllers.config.observability.listen=0.0.0.0:9999",
        "probePort=9998",
        "nodeAgent.config.observability.probeListen=0.0.0.0:9998",
        "controllers.config.observability.probeListen=0.0.0.0:9998",
    )
    node = pod_spec(docs, "DaemonSet", "nodeagent")
    ctrl = pod_spec(docs, "Deployment", "nodeagent-controllers")
    for spec in (node, ctrl):
        (container,) = spec["containers"]
        assert container["image"] == "registry.example/na:9.9.9"
        assert container["imagePullPolicy"] == "Always"
        assert container["ports"][:2] == [
            {"name": "metrics", "containerPort": 9999, "protocol": "TCP"},
            {"name": "probes", "containerPort": 9998, "protocol": "TCP"},
        ]
    assert len(node["containers"][0]["ports"]) == 2
    assert ctrl["containers"][0]["ports"][2]["name"] == "bridge"
    assert node["containers"][0]["resources"]["limits"] == {"memory": "1Gi"}
    assert node["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert node["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert ctrl["nodeSelector"] == {"role": "infra"}
    assert ctrl["tolerations"] == [{"key": "infra", "operator": "Exists"}]
    assert by_key(docs)[("Deployment", "nodeagent-controllers")]["spec"]["replicas"] == 3
    configs = agent_configs(docs)
    assert configs["nodeagent-config"].shutdown.budget == 900
    assert not configs["nodeagent-config"].run_controllers
    assert configs["nodeagent-controllers-config"].eviction.heartbeat_deadline == 300
    assert configs["nodeagent-controllers-config"].leader.lease_name == "other-lease"
    role = by_key(docs)[("Role", "nodeagent-leader-election")]
    assert role["rules"][1]["resourceNames"] == ["other-lease"]
    for cfg in configs.values():
        assert cfg.observability.listen == "0.0.0.0:9999"
        assert cfg.observability.probe_listen == "0.0.0.0:9998"


def test_network_policy_values(helm: Path) -> None:
    """metricsFrom is the one rule's peers; without peers no rule at all (an empty `from` would
    let everyone in); off, no policy."""
    ours = "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=obs"
    (policy,) = [d for d in render(helm, NAMESPACE, ours) if d["kind"] == "NetworkPolicy"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"team": "obs"}}}]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    closed = [
        d
        for d in render(helm, NAMESPACE, "networkPolicy.metricsFrom=null")
        if d["kind"] == "NetworkPolicy"
    ]
    assert [d["spec"]["ingress"] for d in closed] == [[]]
    assert closed[0]["spec"]["policyTypes"] == ["Ingress"]
    off = render(helm, NAMESPACE, "networkPolicy.enabled=false")
    assert not [d for d in off if d["kind"] == "NetworkPolicy"]


def test_the_bridges_port_is_kept_to_the_api_servers_addresses_on_request(helm: Path) -> None:
    """evictionBridge.apiServerCIDRs: the only peers of the bridge's port (by default every
    address, as the kustomize component ships it)."""

    def bridge_rule(*sets: str) -> Doc:
        docs = by_key(render(helm, NAMESPACE, "evictionBridge.enabled=true", *sets))
        (rule,) = docs[("NetworkPolicy", "nodeagent-eviction-bridge")]["spec"]["ingress"]
        assert rule["ports"] == [{"port": "bridge", "protocol": "TCP"}]
        return dict(rule)

    assert bridge_rule()["from"] == [
        {"ipBlock": {"cidr": "0.0.0.0/0"}},
        {"ipBlock": {"cidr": "::/0"}},
    ]
    ours = bridge_rule("evictionBridge.apiServerCIDRs={10.0.0.10/32,10.0.0.11/32}")
    assert ours["from"] == [
        {"ipBlock": {"cidr": "10.0.0.10/32"}},
        {"ipBlock": {"cidr": "10.0.0.11/32"}},
    ]


def test_default_configs_listen_on_the_pod_ip_at_the_metrics_port(helm: Path) -> None:
    """Probes and Prometheus reach the pod's IP: observability.listen and probeListen must not
    be loopback."""
    docs = render(helm)
    configs = agent_configs(docs)
    for kind, name, config in (
        ("DaemonSet", "nodeagent", "nodeagent-config"),
        ("Deployment", "nodeagent-controllers", "nodeagent-controllers-config"),
    ):
        (container,) = pod_spec(docs, kind, name)["containers"]
        listeners = configs[config].observability.listen, configs[config].observability.probe_listen
        for listen, container_port in zip(listeners, container["ports"][:2], strict=True):
            assert listen is not None
            host, _, port = listen.rpartition(":")
            assert host in ("0.0.0.0", "::", "[::]"), (config, host)
            assert container_port["containerPort"] == int(port)


def test_monitoring_objects_are_packaging_monitorings(helm: Path) -> None:
    assert not {"PodMonitor", "PrometheusRule"} & {d["kind"] for d in render(helm)}
    assert ("ConfigMap", "nodeagent-dashboard") not in by_key(render(helm))
    ours = by_key(render(helm, NAMESPACE, *TOGGLES))
    for path in ("podmonitor.yaml", "prometheusrule.yaml"):
        theirs = yaml.safe_load((MONITORING / path).read_text())
        assert without_helm_labels(ours[key(theirs)]) == theirs, path
    dashboard = ours[("ConfigMap", "nodeagent-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["nodeagent.json"]) == json.loads(
        (MONITORING / "dashboard.json").read_text()
    )
    labelled = by_key(render(helm, NAMESPACE, *TOGGLES, "monitoring.podMonitor.labels.release=kps"))
    assert labelled[("PodMonitor", "nodeagent")]["metadata"]["labels"]["release"] == "kps"


# --- Helm's conventions: labels, names, the usual values --------------------------------------


def test_every_template_object_has_helms_labels(helm: Path) -> None:
    for doc in render(helm, "ops", *TOGGLES):
        without_helm_labels(doc)  # asserts they are there


def test_selectors_are_the_first_charts(helm: Path) -> None:
    """Selectors are immutable: app.kubernetes.io/name alone, whatever the release's name, as
    the chart's first version (and packaging/kubernetes) had them, so `helm upgrade` works."""
    args = ("template", "other", str(CHART), "--namespace", NAMESPACE)
    docs = by_key([d for d in yaml.safe_load_all(run_helm(helm, *args)) if d])
    node = {"app.kubernetes.io/name": "nodeagent"}
    ctrl = {"app.kubernetes.io/name": "nodeagent-controllers"}
    assert docs[("DaemonSet", "nodeagent")]["spec"]["selector"] == {"matchLabels": node}
    assert docs[("Deployment", "nodeagent-controllers")]["spec"]["selector"] == {
        "matchLabels": ctrl
    }
    assert docs[("PodDisruptionBudget", "nodeagent-controllers")]["spec"]["selector"] == {
        "matchLabels": ctrl
    }
    bridge = ("template", "other", str(CHART), "--set", "evictionBridge.enabled=true")
    service = by_key([d for d in yaml.safe_load_all(run_helm(helm, *bridge)) if d])[
        ("Service", SERVICE)
    ]
    assert service["spec"]["selector"] == ctrl
    for k, want in (
        (("DaemonSet", "nodeagent"), node),
        (("Deployment", "nodeagent-controllers"), ctrl),
    ):
        assert want.items() <= docs[k]["spec"]["template"]["metadata"]["labels"].items()


def test_fullname_override_reaches_every_name_and_reference(helm: Path) -> None:
    """fullnameOverride renames every object but the bridge's (fixed in the code), and every
    reference follows: the ServiceAccounts in RBAC subjects and in the policies' CEL, the
    ConfigMaps the pods mount, roleRefs, policy bindings."""
    docs = render(
        helm, "ops", *TOGGLES, "fullnameOverride=na", "monitoring.podMonitor.enabled=true"
    )
    names = {key(d) for d in docs}
    for kind, name in names:
        if kind in ("CustomResourceDefinition", "Namespace"):
            continue
        assert name.startswith(("na-", BRIDGE_PREFIX)) or name == "na", (kind, name)
    assert {("ServiceAccount", "na"), ("ServiceAccount", "na-controllers")} <= names
    text = json.dumps([d for d in docs if d["kind"] != "ConfigMap"])
    assert ":nodeagent'" not in text and ":nodeagent-controllers'" not in text
    for doc in docs:
        for subject in doc.get("subjects", []):
            assert ("ServiceAccount", subject["name"]) in names, key(doc)
        if "roleRef" in doc:
            assert (doc["roleRef"]["kind"], doc["roleRef"]["name"]) in names, key(doc)
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            assert ("ValidatingAdmissionPolicy", doc["spec"]["policyName"]) in names
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    node_user = "'system:serviceaccount:ops:na'"
    ctrl_user = "'system:serviceaccount:ops:na-controllers'"
    assert node_user in policies["na-node-restriction"]["spec"]["matchConditions"][0]["expression"]
    assert node_user in json.dumps(policies["na-node-token"]["spec"])
    assert "request.name == 'na'" in json.dumps(policies["na-node-token"]["spec"])
    assert ctrl_user in json.dumps(policies["na-controllers-restriction"]["spec"])
    assert ctrl_user in json.dumps(policies["na-webhook-configuration-restriction"]["spec"])
    for kind, name in (("DaemonSet", "na"), ("Deployment", "na-controllers")):
        spec = pod_spec(docs, kind, name)
        assert ("ServiceAccount", spec["serviceAccountName"]) in names
        (config,) = [v for v in spec["volumes"] if v["name"] == "config"]
        assert ("ConfigMap", config["configMap"]["name"]) in names
    token_role = by_key(docs)[("Role", "na-node-token")]
    assert token_role["rules"][0]["resourceNames"] == ["na"]
    # the names the code relies on stay: the bridge's Service, Secret and webhook, the Lease
    assert ("Service", SERVICE) in names
    assert ("ValidatingWebhookConfiguration", WEBHOOK_CONFIGURATION) in names
    assert agent_configs(docs)["na-controllers-config"].leader.lease_name == "nodeagent-controllers"
    # the labels (and so selectors and the Prometheus job) are nameOverride's, not changed here
    assert by_key(docs)[("DaemonSet", "na")]["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": "nodeagent"}
    }


def render_values(helm: Path, tmp_path: Path, values: Doc) -> list[Doc]:
    """The objects rendered with a values file (into NAMESPACE)."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    args = ("template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(path))
    return [d for d in yaml.safe_load_all(run_helm(helm, *args)) if d]


def test_pod_values_land_and_defaults_tolerate_everything(helm: Path, tmp_path: Path) -> None:
    node = pod_spec(render(helm), "DaemonSet", "nodeagent")
    assert node["tolerations"] == [{"operator": "Exists"}]
    assert "imagePullSecrets" not in node and "affinity" not in node
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    values = {
        "imagePullSecrets": [{"name": "regcred"}],
        "podAnnotations": {"example.com/a": "1"},
        "podLabels": {"team": "infra"},
        "nodeAgent": {"affinity": affinity, "extraEnv": [{"name": "A", "value": "1"}]},
        "controllers": {
            "affinity": affinity,
            "nodeSelector": {"role": "infra"},
            "tolerations": [{"key": "infra", "operator": "Exists"}],
            "extraEnv": [{"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        },
    }
    docs = render_values(helm, tmp_path, values)
    for kind, name, env in (
        ("DaemonSet", "nodeagent", ["NODE_NAME", "A"]),
        ("Deployment", "nodeagent-controllers", ["POD_NAME", "B"]),
    ):
        template = by_key(docs)[(kind, name)]["spec"]["template"]
        spec = template["spec"]
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert spec["affinity"] == affinity  # the controllers' default spread replaced
        assert template["metadata"]["labels"]["team"] == "infra"
        assert template["metadata"]["annotations"]["example.com/a"] == "1"
        assert [e["name"] for e in spec["containers"][0]["env"]] == env
    annotations = by_key(docs)[("DaemonSet", "nodeagent")]["spec"]["template"]["metadata"]
    assert annotations["annotations"]["nodeagent.io/drain"] == "skip"  # the chart's stay
    ctrl = pod_spec(docs, "Deployment", "nodeagent-controllers")
    assert ctrl["nodeSelector"] == {"role": "infra"}
    assert ctrl["tolerations"] == [{"key": "infra", "operator": "Exists"}]
    # the DaemonSet keeps tolerating every taint when only its affinity is set
    assert pod_spec(docs, "DaemonSet", "nodeagent")["tolerations"] == [{"operator": "Exists"}]


# --- values.schema.json -------------------------------------------------------------------------


def _schema() -> Doc:
    schema: Doc = json.loads((CHART / "values.schema.json").read_text())
    return schema


def _resolve(schema: Doc, node: Doc) -> Doc:
    while "$ref" in node:
        node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
    if "allOf" in node:
        return _resolve(schema, node["allOf"][0])
    return node


def test_schema_is_draft_07_and_types_every_value() -> None:
    """Every key of values.yaml has a type in the schema, and objects of the chart's own
    refuse keys they do not know (the agents' configurations and Kubernetes types aside)."""
    schema = _schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(value: Any, node: Doc, path: str) -> None:
        node = _resolve(schema, node)
        assert "type" in node, f"{path}: no type"
        if isinstance(value, dict) and "properties" in node:
            assert node.get("additionalProperties") is False, f"{path}: open"
            for k, v in value.items():
                assert k in node["properties"], f"{path}.{k}: not in the schema"
                walk(v, node["properties"][k], f"{path}.{k}")

    walk(values, schema, "")


BAD_VALUES: list[tuple[str, Doc]] = [
    ("an unknown top-level key", {"replicas": 3}),
    ("an unknown key of the chart's", {"controllers": {"replica": 3}}),
    ("a string for a number", {"controllers": {"replicas": "two"}}),
    ("a port out of range", {"metricsPort": 70000}),
    ("a pull policy Kubernetes does not know", {"image": {"pullPolicy": "Sometimes"}}),
    ("a key the chart sets itself", {"nodeAgent": {"config": {"runControllers": True}}}),
    ("the controllers' leader", {"controllers": {"config": {"leader": {"namespace": "x"}}}}),
    ("tolerations not a list", {"nodeAgent": {"tolerations": {"operator": "Exists"}}}),
    ("an env var without a name", {"controllers": {"extraEnv": [{"value": "1"}]}}),
    ("a pull secret as a bare string", {"imagePullSecrets": ["regcred"]}),
    ("an annotation that is not a string", {"podAnnotations": {"a": 1}}),
    ("a fullnameOverride that is no name", {"fullnameOverride": "Node_Agent"}),
]


def test_values_that_break_the_schema_are_refused(helm: Path, tmp_path: Path) -> None:
    """helm template and helm lint refuse a values file that breaks values.schema.json, naming
    the value; a file with every new value set is accepted."""
    for why, bad in BAD_VALUES:
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(bad))
        for cmd in (["template", RELEASE, str(CHART)], ["lint", "--strict", str(CHART)]):
            done = subprocess.run(
                [str(helm), *cmd, "-f", str(path)], capture_output=True, text=True, timeout=120
            )
            assert done.returncode != 0, f"{why}: accepted by helm {cmd[0]}"
            assert "schema" in done.stdout + done.stderr, (why, done.stderr)
    good = tmp_path / "good.yaml"
    good.write_text(
        yaml.safe_dump(
            {
                "image": {"repository": "registry.example/nodeagent", "tag": "0.1.0"},
                "imagePullSecrets": [{"name": "regcred"}],
                "fullnameOverride": "na",
                "podAnnotations": {"a": "1"},
                "podLabels": {"b": "2"},
                "nodeAgent": {"extraEnv": [{"name": "A", "value": "1"}], "affinity": {}},
                "controllers": {"affinity": {}, "extraEnv": [], "tolerations": []},
            }
        )
    )
    run_helm(helm, "lint", "--strict", str(CHART), "-f", str(good))
    run_helm(helm, "template", RELEASE, str(CHART), "-f", str(good))


def rendered_notes(helm: Path, tmp_path: Path, *sets: str) -> str:
    """NOTES.txt as helm install prints it. `helm template` does not render it and
    `helm install --dry-run=client` still wants a reachable cluster: a copy of the chart
    renders it through `tpl` in a template of its own."""
    chart = tmp_path / "chart"
    shutil.rmtree(chart, ignore_errors=True)
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes.txt")
    (chart / "templates" / "zz-notes.yaml").write_text(
        'notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n'
    )
    args = ["template", RELEASE, str(chart), "--namespace", "ops"]
    args += ["--show-only", "templates/zz-notes.yaml"]
    for s in sets:
        args += ["--set", s]
    notes: str = yaml.safe_load(run_helm(helm, *args))["notes"]
    return notes


def test_notes_say_how_to_check_and_watch(helm: Path, tmp_path: Path) -> None:
    """NOTES.txt: the commands to check the release is healthy name its namespace and
    objects; it says the kubelet setting, the watch, and the image's provenance while the
    image is the unpublished default."""
    notes = rendered_notes(helm, tmp_path, "fullnameOverride=na")
    for needed in (
        "kubectl -n ops rollout status daemonset/na\n",
        "kubectl -n ops rollout status deployment/na-controllers\n",
        "shutdownGracePeriod: 0s",
        "kubectl get nm -w",
        "is not published",
        "Dockerfile",
    ):
        assert needed in notes, needed
    ours = rendered_notes(helm, tmp_path, "image.repository=registry.example/na")
    assert "not published" not in ours
