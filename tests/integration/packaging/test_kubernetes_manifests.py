"""The Kubernetes manifests in packaging/kubernetes: they apply with real kubectl (`apply -k`) to
the simulated cluster, the DaemonSet (node agents) and the Deployment (controllers) are wired to
their configurations, and the RBAC grants each identity exactly the API calls of the parts it
runs: every call nodeagent/ makes is allowed to the identity whose configuration runs that part
(node-local; controllers and leader election), and every grant is used by one of its parts.
What the admission policy enforces is tested on the real server
(tests/integration/test_least_privilege.py)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import subprocess
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent import config as agent_config
from nodeagent.manifests import crd_stream
from nodeagent.model.drainplan import DRAIN_SKIP, PodType, classify
from nodeagent.model.names import DRAIN_ANNOTATION
from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.resources import ResourceType
from tests.conftest import Kubectl, kubectl_path
from tests.simutil import until

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "packaging" / "kubernetes"
BRIDGE = K8S / "eviction-bridge"
PACKAGE = ROOT / "nodeagent"
NAMESPACE = "nodeagent-system"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@functools.cache
def base_manifests() -> list[dict[str, Any]]:
    """Every document of the base (parsed once; do not modify)."""
    out: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            out.extend(documents(path))
    return out


@functools.cache
def manifests() -> list[dict[str, Any]]:
    """Everything installed with the eviction bridge (its component over the base: its patches
    replace the base's documents of the same kind and name), so each role and binding is
    checked against the configuration that runs it."""
    component = yaml.safe_load((BRIDGE / "kustomization.yaml").read_text())
    patches = [d for p in component["patches"] for d in documents(BRIDGE / p["path"])]
    replaced = {(d["kind"], d["metadata"]["name"]) for d in patches}
    out = [d for d in base_manifests() if (d["kind"], d["metadata"]["name"]) not in replaced]
    for name in component["resources"]:
        out.extend(documents(BRIDGE / name))
    return out + patches


def one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def daemonset() -> dict[str, Any]:
    return one("DaemonSet", "nodeagent")


def deployment() -> dict[str, Any]:
    return one("Deployment", "nodeagent-controllers")


def configmap_config(name: str = "nodeagent-config") -> agent_config.Config:
    text = one("ConfigMap", name)["data"]["config.yaml"]
    return agent_config.from_mapping(yaml.safe_load(text), f"{name} config.yaml")


def config_of(workload: dict[str, Any]) -> agent_config.Config:
    """The configuration a workload's pods read: the ConfigMap mounted at /etc/nodeagent."""
    spec = workload["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/nodeagent"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    return configmap_config(volume["configMap"]["name"])


# --- the files ---------------------------------------------------------------------------


def test_crds_copy_is_current() -> None:
    """crds.yaml is the generated copy of the CRDs (kustomize does not follow crds/ links)."""
    lines = (K8S / "crds.yaml").read_text().splitlines(keepends=True)
    header, body = lines[:3], "".join(lines[3:])
    assert all(line.startswith("#") for line in header)
    assert body == crd_stream(), (
        "packaging/kubernetes/crds.yaml is stale; regenerate it with the command in its header"
    )


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    on_disk = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk
    assert len(listed) == len(set(listed))
    # the bridge's component: its own files and its patches
    component = yaml.safe_load((BRIDGE / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    patched = [p["path"] for p in component["patches"]]
    own = sorted(p.name for p in BRIDGE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(component["resources"] + patched) == own


def kustomized(overlay_dir: Path, *components: Path) -> list[dict[str, Any]]:
    """The objects kustomize (kubectl's) builds of an overlay of the base with
    ``components``, written in ``overlay_dir``."""
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(K8S, overlay_dir)],
        "components": [os.path.relpath(c, overlay_dir) for c in components],
    }
    (overlay_dir / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    built = subprocess.run(
        [kubectl_path(), "kustomize", str(overlay_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(built) if d]


def test_the_bridge_component_over_the_base_builds_what_the_tests_read(tmp_path: Path) -> None:
    """kustomize (kubectl's) builds an overlay of the base with the component into the objects
    manifests() reads, each equal field by field."""
    ours = {(d["kind"], d["metadata"]["name"]): d for d in kustomized(tmp_path, BRIDGE)}
    theirs = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    assert sorted(ours) == sorted(theirs)
    for k, doc in theirs.items():
        assert ours[k] == doc, k


def test_the_bridge_component_changes_only_the_bridge_in_the_controllers_config() -> None:
    """Its copy of the controllers' configuration is the base's, with the bridge on."""
    (base,) = [
        d
        for d in base_manifests()
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "nodeagent-controllers-config"
    ]
    base_cfg = agent_config.from_mapping(yaml.safe_load(base["data"]["config.yaml"]))
    with_bridge = configmap_config("nodeagent-controllers-config")
    bridge = with_bridge.eviction.bridge
    assert bridge.enabled and not base_cfg.eviction.bridge.enabled
    unchanged = dataclasses.replace(
        with_bridge,
        eviction=dataclasses.replace(with_bridge.eviction, bridge=base_cfg.eviction.bridge),
    )
    assert unchanged == base_cfg
    # where the Deployment and the Service expect it
    (container,) = deployment()["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["bridge"] == bridge.port


def test_everything_namespaced_is_in_our_namespace() -> None:
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
    }
    for doc in manifests():
        if doc["kind"] in cluster_scoped:
            assert "namespace" not in doc["metadata"], doc["metadata"]
        else:
            assert doc["metadata"].get("namespace") == NAMESPACE, doc["metadata"]
    assert one("Namespace", NAMESPACE)


# --- the DaemonSet and its configuration ---------------------------------------------------


def test_configmap_config_is_valid_and_points_into_the_mounts() -> None:
    cfg = config_of(daemonset())
    assert cfg.node_name is None  # from NODE_NAME
    assert cfg.kube.kubeconfig is None  # in-cluster
    # the node's part only: the controllers are the Deployment's
    assert cfg.run_node_agent and not cfg.run_controllers
    assert cfg.shutdown.dbus_address == "unix:path=/run/dbus/system_bus_socket"
    mounts = {m["mountPath"]: m for m in daemonset_container()["volumeMounts"]}
    volumes = {v["name"]: v for v in daemonset()["spec"]["template"]["spec"]["volumes"]}

    def host_path(inside: Path, writable: bool = True) -> str:
        """The host path a path inside the container lands on, via the mounts."""
        for mount_path, m in mounts.items():
            if inside == Path(mount_path) or Path(mount_path) in inside.parents:
                hp = volumes[m["name"]].get("hostPath")
                assert hp is not None, f"{inside} is not on a host path mount"
                assert bool(m.get("readOnly")) is not writable, (inside, m)
                return str(Path(hp["path"]) / inside.relative_to(mount_path))
        raise AssertionError(f"{inside} is not mounted")

    # connecting to the bus socket needs no write access: the agent cannot replace it
    socket = Path(cfg.shutdown.dbus_address.removeprefix("unix:path="))
    assert host_path(socket, writable=False) == "/run/dbus/system_bus_socket"
    assert host_path(cfg.shutdown.logind_dropin) == "/etc/systemd/logind.conf.d/zz-nodeagent.conf"
    # `nodeagent reboot`, run in the pod, asks through the host's /run/nodeagent
    assert host_path(cfg.reboot.request_file) == "/run/nodeagent/reboot-requested"
    # the manifest directory and the stash are one mount: rename(2) works between them
    assert cfg.static_pods.manifest_dir is not None and cfg.static_pods.stash_dir is not None
    manifest_dir, stash = cfg.static_pods.manifest_dir, cfg.static_pods.stash_dir
    assert host_path(manifest_dir) == "/etc/kubernetes/manifests"
    assert host_path(stash).startswith("/etc/kubernetes/manifests/")
    (owning,) = [p for p in mounts if Path(p) == manifest_dir or Path(p) in manifest_dir.parents]
    assert Path(owning) in stash.parents
    # the kubelet (and the agent's scan) skip dot entries of the manifest directory
    assert stash.parent == manifest_dir and stash.name.startswith(".")
    # from the host, only these: not /etc/kubernetes whole (kubeadm's pki/ and admin.conf)
    host_paths = sorted(v["hostPath"]["path"] for v in volumes.values() if "hostPath" in v)
    assert host_paths == [
        "/etc/kubernetes/manifests",
        "/etc/systemd/logind.conf.d",
        "/run/dbus",
        "/run/nodeagent",
    ]
    assert_ports_are_the_listeners(daemonset_container(), cfg)


def assert_ports_are_the_listeners(container: dict[str, Any], cfg: agent_config.Config) -> None:
    """The container's ports are the agent's listeners, on the pod's IP: `metrics` is
    observability.listen, `probes` observability.probeListen, where the probes go, and
    `bridge` the eviction bridge's (eviction.bridge.port), where it runs."""
    wanted = {"metrics": cfg.observability.listen, "probes": cfg.observability.probe_listen}
    if cfg.eviction.bridge.enabled:
        wanted["bridge"] = f"0.0.0.0:{cfg.eviction.bridge.port}"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports.keys() == wanted.keys()
    for name, listen in wanted.items():
        assert listen is not None, name
        host, _, port = listen.rpartition(":")
        assert host == "0.0.0.0" and ports[name] == int(port), (name, listen)
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "probes", probe


def daemonset_container() -> dict[str, Any]:
    containers: list[dict[str, Any]] = daemonset()["spec"]["template"]["spec"]["containers"]
    (container,) = containers
    return container


def test_daemonset_runs_the_agent_as_designed() -> None:
    ds = daemonset()
    pod = ds["spec"]["template"]
    spec = pod["spec"]
    c = daemonset_container()
    assert c["image"] == f"ghcr.io/nodeagent/nodeagent:{VERSION}"
    assert pod["metadata"]["annotations"][DRAIN_ANNOTATION] == DRAIN_SKIP
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["serviceAccountName"] == one("ServiceAccount", "nodeagent")["metadata"]["name"]
    assert spec["serviceAccountName"] == NODE_ACCOUNT
    assert {"operator": "Exists"} in spec["tolerations"]  # every taint
    assert not spec.get("hostPID") and not spec.get("hostNetwork") and not spec.get("hostIPC")
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["runAsUser"] == 0
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"]["add"]) <= {"CHOWN", "DAC_OVERRIDE", "FOWNER"}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # the configuration file the image's ENTRYPOINT reads comes from the ConfigMap
    (config_mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/etc/nodeagent"]
    (config_volume,) = [v for v in spec["volumes"] if v["name"] == config_mount["name"]]
    assert config_volume["configMap"]["name"] == "nodeagent-config"
    assert "config.yaml" in one("ConfigMap", "nodeagent-config")["data"]
    assert (
        'ENTRYPOINT ["nodeagent", "run", "--config", "/etc/nodeagent/config.yaml"]'
        in (ROOT / "Dockerfile").read_text()
    )


def test_controllers_deployment_runs_the_controllers_only() -> None:
    d = deployment()
    spec = d["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert d["spec"]["replicas"] == 2
    assert spec["serviceAccountName"] == CONTROLLERS_ACCOUNT
    cfg = config_of(d)
    assert cfg.run_controllers and not cfg.run_node_agent
    # nothing from any host, not root
    assert not [v for v in spec["volumes"] if "hostPath" in v]
    assert not spec.get("hostPID") and not spec.get("hostNetwork") and not spec.get("hostIPC")
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert c["image"] == daemonset_container()["image"]
    # the leader election identity is the pod's name
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # drained like any workload, one replica always kept
    assert DRAIN_ANNOTATION not in (d["spec"]["template"]["metadata"].get("annotations") or {})
    pdb = one("PodDisruptionBudget", "nodeagent-controllers")
    labels = d["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert d["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # the DaemonSet does not select the Deployment's pods, nor the other way round
    ds_selector = daemonset()["spec"]["selector"]["matchLabels"]
    assert not ds_selector.items() <= labels.items()
    assert not d["spec"]["selector"]["matchLabels"].items() <= (
        daemonset()["spec"]["template"]["metadata"]["labels"].items()
    )
    assert_ports_are_the_listeners(c, cfg)


def test_package_and_controllers_agents_share_one_lease() -> None:
    """Agents from the Debian package (given the controllers' credentials and
    runControllers) and the controllers Deployment elect one leader between them."""
    deb = agent_config.load(ROOT / "packaging" / "debian" / "config.yaml", env={})
    pod = config_of(deployment())
    assert (deb.leader.namespace, deb.leader.lease_name) == (
        pod.leader.namespace,
        pod.leader.lease_name,
    )
    assert pod.leader.namespace == NAMESPACE
    role = one("Role", "nodeagent-leader-election")
    names = [n for r in role["rules"] for n in r.get("resourceNames", ())]
    assert names == [pod.leader.lease_name]


def test_network_policy_lets_in_prometheus_to_the_metrics_port_alone() -> None:
    """Both workloads' pods are selected, for ingress only; the one rule lets Prometheus pods of
    the monitoring namespace (one peer: both selectors at once) to the named port `metrics`,
    which both containers have; no rule names the probe port (the kubelet's probes come from
    the pod's node, which a policy cannot block)."""
    policy = one("NetworkPolicy", "nodeagent")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    (selector,) = policy["podSelector"]["matchExpressions"]
    for workload in (daemonset(), deployment()):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert labels[selector["key"]] in selector["values"]
        assert not workload["spec"]["template"]["spec"].get("hostNetwork")
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        assert "metrics" in {p["name"] for p in container["ports"]}
    assert selector["operator"] == "In"
    assert sorted(selector["values"]) == ["nodeagent", "nodeagent-controllers"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert rule["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]


# --- RBAC against the code -------------------------------------------------------------------

# KubeClient methods -> (RBAC verb, on the status subresource)
CLIENT_METHODS = {
    "get": ("get", False),
    "list": ("list", False),
    "watch": ("watch", False),
    "create": ("create", False),
    "replace": ("update", False),
    "replace_status": ("update", True),
    "patch": ("patch", False),
    "patch_status": ("patch", True),
    "delete": ("delete", False),
}
# list + watch of their resource argument (watch_until: one object, until a predicate holds)
INFORMER_CALLS = {"Informer", "informer", "watch_until"}
ROLE_OF_PART = {
    "node": ("ClusterRole", "nodeagent-node"),
    # a .deb agent renewing its Node-bound token (node-token-policy.yaml confines it)
    "node-token": ("Role", "nodeagent-node-token"),
    "controllers": ("ClusterRole", "nodeagent-controllers"),
    "leader": ("Role", "nodeagent-leader-election"),
    # the eviction bridge's certificates: its Secret (namespaced) and its webhook
    # configuration (cluster-scoped), each by name (eviction-bridge/rbac.yaml)
    "bridge-tls": ("Role", "nodeagent-eviction-bridge"),
    "bridge-webhook": ("ClusterRole", "nodeagent-eviction-bridge"),
}
BRIDGE_PARTS = {"bridge-tls", "bridge-webhook"}


def parts_run_by(cfg: agent_config.Config) -> set[str]:
    """The parts of the agent (DESIGN section 3) an agent with this configuration runs."""
    parts = {"node", "node-token"} if cfg.run_node_agent else set()
    if cfg.run_controllers and cfg.eviction.bridge.enabled:
        parts |= BRIDGE_PARTS
    return parts | ({"controllers", "leader"} if cfg.run_controllers else set())


def identities() -> dict[str, set[str]]:
    """ServiceAccount -> the parts that the workload running as it runs (from its ConfigMap)."""
    out: dict[str, set[str]] = {}
    for workload in (daemonset(), deployment()):
        account = workload["spec"]["template"]["spec"]["serviceAccountName"]
        assert account not in out, f"{account} runs two workloads"
        out[account] = parts_run_by(config_of(workload))
    return out


def roles_bound_to(account: str) -> set[tuple[str, str]]:
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    return {
        (d["roleRef"]["kind"], d["roleRef"]["name"])
        for d in manifests()
        if d["kind"].endswith("RoleBinding") and subject in d["subjects"]
    }


def rules_of(account: str) -> list[dict[str, Any]]:
    return [
        rule for kind, name in sorted(roles_bound_to(account)) for rule in rbac_rules(kind, name)
    ]


def _bridge_part(part: str, group: str, resource: str) -> str:
    """The bridge's certificates: the Secret's calls are bridge-tls's, the webhook
    configuration's bridge-webhook's (a Role and a ClusterRole), as are the namespaces the
    webhook reads; its other calls are the controllers'."""
    if part != "bridge":
        return part
    if group == "admissionregistration.k8s.io" or resource == "namespaces":
        return "bridge-webhook"
    return "bridge-tls" if resource == "secrets" else "controllers"


def parts_of(module: Path) -> tuple[str, ...] | None:
    """Which parts of the agent run a module's API calls (DESIGN section 3); None: no client
    code expected there."""
    rel = module.relative_to(PACKAGE).as_posix()
    if rel == "node/token_renewal.py":
        return ("node-token",)
    if rel.startswith("node/") or rel == "app.py":
        return ("node",)
    if rel in ("bridge/certstore.py", "bridge/webhook.py"):
        return ("bridge",)  # split by resource: _bridge_part
    if rel.startswith(("controllers/", "bridge/")):
        return ("controllers",)  # the bridge runs in every controllers replica
    if rel == "kube/discovery.py":  # the leader's and the bridge's question (a ServiceAccount)
        return ("controllers",)
    if rel == "kube/leader.py":
        return ("leader",)
    if rel == "kube/evict.py":  # the imperative eviction of both EvictionRequest APIs
        return ("controllers",)
    if rel == "kube/events.py":  # both record Events
        return ("node", "controllers")
    return None


def scanned_modules() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        # the simulated API server serves the API; client.py is the transport (and the pure
        # model and resources.py only define things)
        if rel.startswith(("sim/", "model/")) or rel in ("kube/client.py", "kube/resources.py"):
            continue
        yield path


def resource_constants() -> dict[str, tuple[str, str]]:
    """Module-level `NAME = Resource(group, version, plural, ...)` anywhere: NAME -> (group,
    plural)."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "sim" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "Resource"
            ):
                args = [a.value for a in node.value.args if isinstance(a, ast.Constant)]
                name = node.targets[0].id
                group, plural = args[0], args[2]
                assert isinstance(group, str) and isinstance(plural, str), name
                assert found.get(name, (group, plural)) == (group, plural), name
                found[name] = (group, plural)
    return found


@dataclass(frozen=True)
class Use:
    part: str
    group: str
    resource: str  # "pods", "pods/eviction", "evictionrequests/status", ...
    verb: str
    where: str


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def _cas_patches(
    tree: ast.AST, parents: dict[ast.AST, ast.AST], made: ast.Call, where: str
) -> set[bool]:
    """Whether each `.patch` call of the `CasWriter` built by `made` (kept as `self.<name>`)
    in this module writes the status subresource."""
    assign = parents.get(made)
    assert isinstance(assign, ast.Assign), f"{where}: a CasWriter kept other than as self.<name>"
    target = assign.targets[0]
    assert isinstance(target, ast.Attribute), f"{where}: a CasWriter kept other than as self.<name>"
    flags = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "patch"
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == target.attr
        ):
            status = next((k.value for k in node.keywords if k.arg == "status"), None)
            flags.add(isinstance(status, ast.Constant) and status.value is True)
    assert flags, f"{where}: a CasWriter whose writes this scan does not find"
    return flags


@functools.cache
def api_uses() -> list[Use]:
    """Every API call in nodeagent/ that names a resource constant, with the part making it.
    A resource constant used any other way fails: teach this function what it means."""
    constants = resource_constants()
    uses: list[Use] = []
    unknown: list[str] = []
    for path in scanned_modules():
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        rel = path.relative_to(ROOT).as_posix()
        found: list[tuple[str, str, str, str]] = []  # group, resource, verb, where
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and _callee(node) == "evict":
                found.append(("", "pods/eviction", "create", where))
            if isinstance(node, ast.Call) and _callee(node) == "request_token":
                found.append(("", "serviceaccounts/token", "create", where))
            if not (isinstance(node, ast.Name) and node.id in constants):
                continue
            if not isinstance(node.ctx, ast.Load):
                continue
            group, plural = constants[node.id]
            parent = parents.get(node)
            callee = _callee(parent) if isinstance(parent, ast.Call) else None
            if (
                isinstance(parent, ast.Call)
                and parent.args[:1] == [node]
                and (callee in CLIENT_METHODS)
            ):
                verb, status = CLIENT_METHODS[callee]
                found.append((group, plural + ("/status" if status else ""), verb, where))
            elif isinstance(parent, ast.Call) and callee in INFORMER_CALLS and node in parent.args:
                found += [(group, plural, "list", where), (group, plural, "watch", where)]
            elif isinstance(parent, ast.Call) and callee in ("serves", "ask_served"):
                # kube.discovery: a list
                found.append((group, plural, "list", where))
            elif isinstance(parent, ast.Call) and callee == "RequestApi":
                # controllers.interceptors.apis: the interceptors watch it, read one again on
                # a conflict and write their entries of its status
                found += [(group, plural, v, where) for v in ("list", "watch", "get")]
                found.append((group, plural + "/status", "patch", where))
            elif isinstance(parent, ast.Call) and callee == "CasWriter":
                # kube.caswrite: the writer's merge patches, of the object or its status
                for status in _cas_patches(tree, parents, parent, where):
                    found.append((group, plural + ("/status" if status else ""), "patch", where))
            elif isinstance(parent, ast.Attribute):
                pass  # reading .api_version, .kind, .path(): no request
            else:
                unknown.append(f"{where}: {node.id} used as {type(parent).__name__}")
        if not found:
            continue
        parts = parts_of(path)
        if parts is None:
            unknown += [f"{w}: API call in a module of no known part" for *_, w in found]
            continue
        uses += [Use(_bridge_part(p, g, r), g, r, v, w) for g, r, v, w in found for p in parts]
    assert not unknown, "\n".join(unknown)
    return uses


def rbac_rules(kind: str, name: str) -> list[dict[str, Any]]:
    return one(kind, name)["rules"]  # type: ignore[no-any-return]


def allows(rules: Iterable[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


NODE_ACCOUNT = "nodeagent"
CONTROLLERS_ACCOUNT = "nodeagent-controllers"


def test_rbac_has_no_wildcards_and_each_account_has_its_parts_roles_only() -> None:
    for doc in manifests():
        if doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                for key in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[key], (doc["metadata"]["name"], rule)
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert one(doc["roleRef"]["kind"], doc["roleRef"]["name"])
            (subject,) = doc["subjects"]
            assert subject["kind"] == "ServiceAccount" and subject["namespace"] == NAMESPACE
            assert one("ServiceAccount", subject["name"])
    assert identities() == {
        NODE_ACCOUNT: {"node", "node-token"},
        CONTROLLERS_ACCOUNT: {"controllers", "leader", *BRIDGE_PARTS},
    }
    for account, parts in identities().items():
        assert roles_bound_to(account) == {ROLE_OF_PART[p] for p in parts}, account
    # the node agents' credentials reach no cluster-wide power
    assert not roles_bound_to(NODE_ACCOUNT) & {ROLE_OF_PART["controllers"], ROLE_OF_PART["leader"]}
    # the leader-election Role is where the Lease lives, nowhere else
    assert one("Role", "nodeagent-leader-election")["metadata"]["namespace"] == NAMESPACE


def test_the_scan_sees_the_agents_api_calls() -> None:
    """Guards the scan itself: calls that certainly exist are found, in the right part."""
    uses = {(u.part, u.group, u.resource, u.verb) for u in api_uses()}
    assert ("node", "nodeagent.io", "nodemaintenances", "create") in uses  # shutdown flow
    assert ("node", "scheduling.k8s.io", "priorityclasses", "watch") in uses  # informer
    assert ("controllers", "", "pods/eviction", "create") in uses  # imperative eviction
    assert ("leader", "coordination.k8s.io", "leases", "update") in uses
    assert ("node", "", "events", "create") in uses
    assert ("node-token", "", "serviceaccounts/token", "create") in uses
    assert ("controllers", "", "events", "create") in uses


def test_every_api_call_is_allowed_to_its_part() -> None:
    missing = [
        f"{u.where}: {ROLE_OF_PART[u.part][1]} lacks {u.verb} on "
        f"{u.resource}{'.' + u.group if u.group else ''}"
        for u in api_uses()
        if not allows(rbac_rules(*ROLE_OF_PART[u.part]), u.group, u.resource, u.verb)
    ]
    assert not missing, "\n".join(sorted(set(missing)))


def test_every_api_call_is_allowed_to_the_account_running_its_part() -> None:
    """The DaemonSet's and the Deployment's accounts each can make the calls of the parts
    their configurations run."""
    missing = [
        f"{u.where}: {account} may not {u.verb} {u.resource}{'.' + u.group if u.group else ''}"
        for account, parts in identities().items()
        for u in api_uses()
        if u.part in parts and not allows(rules_of(account), u.group, u.resource, u.verb)
    ]
    assert not missing, "\n".join(sorted(set(missing)))


def test_every_grant_is_used_by_its_part() -> None:
    """Least privilege: nothing is granted that the part's code does not call. `get` goes with
    `list`/`watch` (it reveals nothing a list does not). Each role serves one part, and each
    account has the roles of its parts only (above), so no account holds a grant that none of
    its parts uses."""
    uses = api_uses()
    unused = []
    for part, (kind, name) in ROLE_OF_PART.items():
        used = {(u.group, u.resource, u.verb) for u in uses if u.part == part}
        read = {(g, r) for g, r, v in used if v in ("list", "watch")}
        for rule in rbac_rules(kind, name):
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        if (group, resource, verb) in used:
                            continue
                        if verb == "get" and (group, resource) in read:
                            continue
                        unused.append(f"{name}: {verb} on {resource} ({group or 'core'})")
    assert not unused, "granted but never called:\n" + "\n".join(unused)


def test_node_role_touches_no_pods_and_writes_no_nodes() -> None:
    """What the admission policy cannot see, RBAC refuses: a node's agent reads and changes no
    Pod (the node's own kubelet may read only its node's pods; RBAC cannot say "this node's",
    so none: the controllers carry out the shutdown's final phase), and changes no Node (cordons
    and taints are the controllers'); of a Node it may only patch the status (the policy keeps
    that to its Node's lifecycle conditions)."""
    rules = rbac_rules(*ROLE_OF_PART["node"])
    for resource in ("nodes", "nodes/status", "pods", "pods/eviction", "pods/status"):
        for verb in ("create", "update", "patch", "delete"):
            expected = (resource, verb) == ("nodes/status", "patch")
            assert allows(rules, "", resource, verb) is expected, (resource, verb)
    for verb in ("get", "list", "watch"):
        assert not allows(rules, "", "pods", verb), verb
    assert not allows(rules, "nodeagent.io", "evictionrequests", "create")
    assert not allows(rules, "nodeagent.io", "nodemaintenances/status", "patch")


CERTS = K8S / "client-certificates"
CERT_GROUP = "system:nodeagents"
CERT_USER_PREFIX = "system:nodeagent:"


def test_client_certificate_agents_get_the_node_role_only() -> None:
    kustomization = yaml.safe_load((CERTS / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["rbac.yaml"]
    (binding,) = documents(CERTS / "rbac.yaml")
    assert binding["kind"] == "ClusterRoleBinding"
    assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) == ROLE_OF_PART["node"]
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": CERT_GROUP}
    ]


def test_admission_policy_covers_every_node_identity_and_no_other() -> None:
    from nodeagent.model.names import KUBELET_INTERCEPTOR, NODE_LABEL

    policy = one("ValidatingAdmissionPolicy", "nodeagent-node-restriction")
    binding = one("ValidatingAdmissionPolicyBinding", "nodeagent-node-restriction")
    assert binding["spec"] == {
        "policyName": "nodeagent-node-restriction",
        "validationActions": ["Deny"],
    }
    assert policy["spec"]["failurePolicy"] == "Fail"
    (condition,) = policy["spec"]["matchConditions"]
    text = condition["expression"]
    assert f"'system:serviceaccount:{NAMESPACE}:{NODE_ACCOUNT}'" in text
    assert f"'{CERT_USER_PREFIX}'" in text and f"'{CERT_GROUP}'" in text
    assert CONTROLLERS_ACCOUNT not in yaml.safe_dump(policy)
    # the user-name prefix is cut off by its length
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert f"substring({len(CERT_USER_PREFIX)})" in variables["nodeName"]
    assert "'authentication.kubernetes.io/node-name'" in variables["nodeName"]
    # the names it checks are the code's (model.names)
    rules = yaml.safe_dump(policy["spec"]["validations"]) + yaml.safe_dump(variables)
    assert f"'{NODE_LABEL}'" in rules and f"'{KUBELET_INTERCEPTOR}'" in rules
    # the Node conditions it lets a node's agent write are the code's
    from nodeagent.model.nodeconditions import CONDITION_TYPES

    listed = yaml.safe_load(variables["lifecycleConditions"].replace("'", '"'))
    assert sorted(listed) == sorted(CONDITION_TYPES)
    resources = {
        r for rule in policy["spec"]["matchConstraints"]["resourceRules"] for r in rule["resources"]
    }
    node_writes = {
        u.resource
        for u in api_uses()
        if u.part == "node" and u.verb not in ("get", "list", "watch")
    }
    assert node_writes <= resources
    # what it lets a shutdown maintenance carry is what the code writes
    from nodeagent.model import names, shutdown

    boot = shutdown.boot_id("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "7431d")
    body = shutdown.shutdown_maintenance("node-1", boot, "reboot", [{"podPriority": 1}])
    listed = {
        name: set(yaml.safe_load(variables[name].replace("'", '"')))
        for name in ("shutdownLabels", "shutdownAnnotations", "shutdownSpec")
    }
    assert listed["shutdownLabels"] == set(body["metadata"]["labels"])
    assert listed["shutdownAnnotations"] == {
        names.ANNOTATION_SHUTDOWN_TYPE,
        names.FINAL_PHASE_ANNOTATION,
    }
    assert listed["shutdownSpec"] == set(body["spec"])
    # the name the policy builds from the trigger, the node and the boot labels is the code's,
    # for each trigger the code has, and only those
    named = (
        "'nodeagent-' + variables.trigger + '-' + variables.nodeName + '-' + variables.bootId + "
        "(variables.userspaceBoot != '' ? '-' + variables.userspaceBoot : '')"
    )
    create = [
        " ".join(v["expression"].split())
        for v in policy["spec"]["validations"]
        if named in " ".join(v["expression"].split())
    ]
    assert len(create) == 1
    assert f"variables.trigger in {list(shutdown.TRIGGERS)!r}" in create[0]
    assert variables["trigger"] == f"variables.newLabels[?'{names.LABEL_TRIGGER}'].orValue('')"
    # a final phase is asked on a shutdown only: a reboot request is made before any
    assert (
        f"(variables.trigger == '{shutdown.TRIGGER_SHUTDOWN}' || "
        f"!('{names.FINAL_PHASE_ANNOTATION}' in object.metadata.?annotations.orValue({{}})))"
    ) in create[0]
    for trigger in shutdown.TRIGGERS:
        made = shutdown.shutdown_maintenance(
            "node-1", boot, "reboot", [{"podPriority": 1}], trigger=trigger
        )
        labels = made["metadata"]["labels"]
        assert labels[names.LABEL_TRIGGER] == trigger
        assert set(labels) == listed["shutdownLabels"]
        assert set(made["metadata"]["annotations"]) <= listed["shutdownAnnotations"]
        assert made["metadata"]["name"] == (
            f"nodeagent-{trigger}-node-1-{labels[names.LABEL_BOOT_ID]}-"
            f"{labels[names.LABEL_USERSPACE_BOOT]}"
        )
    # and the forms it pins are the code's
    assert shutdown.KERNEL_BOOT_ID.pattern in variables["bootPinned"]
    assert shutdown.USERSPACE_BOOT.pattern in variables["bootPinned"]
    # the component its Events must name is the one the node side records them as (app.py)
    assert variables["eventComponent"] == f"'{names.AGENT}'"


def test_webhook_configuration_policy_keeps_the_controllers_to_the_bridges_ca_bundle() -> None:
    """webhook-configuration-policy.yaml looks at the controllers' account alone, and the
    configuration it lets them patch is the one the code and the RBAC name."""
    from nodeagent.bridge.certstore import WEBHOOK_CONFIGURATION

    name = "nodeagent-webhook-configuration-restriction"
    policy = one("ValidatingAdmissionPolicy", name)
    binding = one("ValidatingAdmissionPolicyBinding", name)
    assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    (condition,) = policy["spec"]["matchConditions"]
    account = f"'system:serviceaccount:{NAMESPACE}:{CONTROLLERS_ACCOUNT}'"
    assert condition["expression"].split() == ["request.userInfo.username", "==", account]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["own"] == f"'{WEBHOOK_CONFIGURATION}'"
    assert agent_config.from_mapping({}).eviction.bridge.webhook_configuration == (
        WEBHOOK_CONFIGURATION
    )
    assert one("ValidatingWebhookConfiguration", WEBHOOK_CONFIGURATION)
    (rule,) = [
        r
        for r in one("ClusterRole", "nodeagent-eviction-bridge")["rules"]
        if "validatingwebhookconfigurations" in r["resources"]
    ]
    assert rule["resourceNames"] == [WEBHOOK_CONFIGURATION]


# --- applied with real kubectl -------------------------------------------------------------

# The simulated API server does not serve RBAC; register the types (storage only, like an API
# server without the RBAC authorizer) so that kubectl can apply the whole kustomization.
RBAC_TYPES = (
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", True
    ),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", False
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        False,
    ),
)


# nor admission policies (nor evaluates them)
ADMISSION_TYPES = (
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        "ValidatingAdmissionPolicy",
        False,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
)


# nor NetworkPolicies (nor enforces them)
NETWORK_TYPES = (
    ResourceType(
        "networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", True
    ),
)


@pytest.fixture
def with_rbac(sim: SimCluster) -> SimCluster:
    for rt in RBAC_TYPES + ADMISSION_TYPES + NETWORK_TYPES:
        sim.store.register(rt)
    return sim


async def test_kubectl_apply_k_installs_everything(with_rbac: SimCluster, kubectl: Kubectl) -> None:
    sim = with_rbac
    out = await kubectl.ok("apply", "-k", str(K8S))
    expected = {(d["kind"], d["metadata"]["name"]) for d in base_manifests()}
    assert out.count(" created") == len(expected), out

    store = sim.store
    for kind, name in expected:
        rt = next(t for t in store.types.values() if t.kind == kind)
        ns = NAMESPACE if rt.namespaced else None
        assert store.find(rt, ns, name) is not None, (kind, name)
    # the CRDs are served: NodeMaintenances can be listed right away
    await kubectl.ok("get", "nodemaintenances")
    await kubectl.ok("get", "evictionrequests", "-A")

    # the simulated DaemonSet controller runs one agent pod per node, and the drain plan
    # never targets them
    pods_rt = store.resource("", "v1", "pods")

    def agent_pods() -> list[dict[str, Any]]:
        return [
            p
            for p in store.list(pods_rt, NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "nodeagent"
        ]

    await until(sim, lambda: len(agent_pods()) == len(sim.node_names))
    assert sorted(p["spec"]["nodeName"] for p in agent_pods()) == sorted(sim.node_names)
    for pod in agent_pods():
        cls = classify(pod)
        assert cls.skip and cls.pod_type is PodType.DAEMONSET, pod["metadata"]

    # applying again changes nothing. kubectl always sends a PodDisruptionBudget's selector
    # (its patch strategy is "replace") and so says "configured": the budget is unchanged
    pdb_rt = store.resource("policy", "v1", "poddisruptionbudgets")
    pdb = store.find(pdb_rt, NAMESPACE, "nodeagent-controllers")
    assert pdb is not None
    again = await kubectl.ok("apply", "-k", str(K8S))
    assert again.count(" unchanged") == len(expected) - 1, again
    assert "poddisruptionbudget.policy/nodeagent-controllers configured" in again
    after = store.find(pdb_rt, NAMESPACE, "nodeagent-controllers")
    assert after is not None and after["spec"] == pdb["spec"]
    assert after["metadata"]["generation"] == pdb["metadata"]["generation"]
