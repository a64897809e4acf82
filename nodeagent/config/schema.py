"""What the agent's configuration is: one frozen dataclass per section, each setting with its
default, and the error an invalid configuration raises."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodeagent.model import notifications as notif
from nodeagent.model.drainslots import DrainLimit
from nodeagent.model.interceptors.heartbeats import DEFAULT_HEARTBEAT_DEADLINE
from nodeagent.model.interceptors.imperative import EVICTION_BACKOFF_BASE, EVICTION_BACKOFF_CAP
from nodeagent.model.names import ZONE_LABEL
from nodeagent.model.shutdown_standing import DEFAULT_MAX_SHUTDOWN

__all__ = [
    "AnnotateInterceptor",
    "BridgeConfig",
    "Config",
    "ConfigError",
    "EvictionConfig",
    "FinalPhaseConfig",
    "KubeConfig",
    "LeaderConfig",
    "NodeMaintenanceConfig",
    "NotificationsConfig",
    "ObservabilityConfig",
    "RebootConfig",
    "ShutdownConfig",
    "StaticPodConfig",
    "Webhook",
]


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file and the field."""


@dataclass(frozen=True)
class KubeConfig:
    kubeconfig: str | None = None  # None: in-cluster, then ~/.kube/config
    max_concurrent_requests: int = 16
    request_timeout: float = 30.0
    # where the kubeconfig's user reads a Node-bound token from a file (tokenFile: the .deb),
    # ask the TokenRequest API for the next one once this share of its life has passed, for
    # tokenExpiration seconds (the admission policy allows a day at most), and write it there
    token_renewal: bool = True
    token_renew_after: float = 0.8
    token_expiration: int = 3600


@dataclass(frozen=True)
class FinalPhaseConfig:
    # as the kubelet's shutdownGracePeriod and shutdownGracePeriodCriticalPods; 0: off
    grace_period: float = 30.0
    critical_pods_grace_period: float = 10.0


@dataclass(frozen=True)
class ShutdownConfig:
    enabled: bool = True
    # what logind may wait for us (InhibitDelayMaxSec written to the drop-in)
    budget: float = 600.0
    # release the lock this long before the budget runs out, so logind never kills the wait
    safety_margin: float = 10.0
    # release when the API server could not be reached for this long during a shutdown
    api_unreachable_release_after: float = 30.0
    logind_dropin: Path = Path("/etc/systemd/logind.conf.d/zz-nodeagent.conf")
    manage_dropin: bool = True
    # after the reboot, complete and delete our own shutdown maintenance once the node is Ready
    complete_after_reboot: bool = True
    dbus_address: str | None = None  # None: the system bus
    # spec.drainPlan of the shutdown maintenance (KEP-4212 entries); the defaults fill the rest
    drain_plan: tuple[Mapping[str, Any], ...] = ()
    # when this boot's shutdown began, for an agent restarted during it (on /run: per boot);
    # None: shutdown.json in $RUNTIME_DIRECTORY (systemd's RuntimeDirectory=), if set
    record_file: Path | None = None
    final_phase: FinalPhaseConfig = field(default_factory=FinalPhaseConfig)


@dataclass(frozen=True)
class RebootConfig:
    """Coordinated reboots: a reboot asked for on the node (a reboot-required sentinel, a
    sentinel command, `nodeagent reboot`) becomes a NodeMaintenance that waits for its drain
    slot and drains; once Drained the agent reboots the node through logind."""

    # off unless opted into: an agent that reboots its node by itself must be asked to
    enabled: bool = False
    # a reboot is required while this file exists (Debian's and Ubuntu's, as kured's default);
    # watched, never polled. A file last written before this boot began is stale. null: none
    sentinel: Path | None = Path("/var/run/reboot-required")
    # also required while this command exits 0 (as kured's --reboot-sentinel-command): one
    # string split as a shell would (no shell runs it) or a list of arguments; None: none
    sentinel_command: tuple[str, ...] | None = None
    # seconds between runs of the sentinel command (a command cannot be watched)
    check_interval: float = 60.0
    # a run of the sentinel command that takes longer (or longer than checkInterval) is
    # killed and counts as not required
    command_timeout: float = 10.0
    # `nodeagent reboot` writes this file (its reason inside), `--cancel` removes it; watched
    request_file: Path = Path("/run/nodeagent/reboot-requested")


@dataclass(frozen=True)
class LeaderConfig:
    # where packaging/kubernetes creates the agent's ServiceAccount and the Role for this Lease
    namespace: str = "nodeagent-system"
    lease_name: str = "nodeagent-controllers"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class AnnotateInterceptor:
    name: str
    pod_selector: Mapping[str, Any]
    annotation_key: str
    annotation_value: str = "true"


@dataclass(frozen=True)
class BridgeConfig:
    """The eviction bridge (issue 28): the pods/eviction webhook every controllers replica
    serves, leader or not, so that kubectl drain and the autoscalers wait for interceptors."""

    enabled: bool = False
    port: int = 8443  # HTTPS, on every address (the webhook Service's targetPort `bridge`)
    # wait for the DaemonSet and the static pod interceptors too (they act only within a
    # NodeMaintenance: a legacy drain then waits for one)
    daemon_set_pods: bool = False
    static_pods: bool = False
    # users whose evictions always pass, besides the controllers' own ServiceAccount
    # (system:serviceaccount:<leader.namespace>:nodeagent-controllers)
    own_users: tuple[str, ...] = ()
    # whose caBundle the controllers keep; None: something else injects the CA (cert-manager)
    webhook_configuration: str | None = "nodeagent-eviction-bridge"
    # managed: the controllers make a self-signed CA and serving certificate in the Secret
    # nodeagent-eviction-bridge-tls and renew them; provided: someone else keeps that Secret
    # (cert-manager's Certificate: tls.crt, tls.key, ca.crt), which the bridge only reads
    certificates: str = "managed"
    # a PEM file of the CA(s) whose client certificates the bridge accepts: with it, a
    # connection without such a certificate is refused in the TLS handshake (kube-apiserver
    # presents one where its AdmissionConfiguration's WebhookAdmissionConfiguration names a
    # kubeConfigFile with a client certificate for the webhook's host). None: any client
    client_ca_file: Path | None = None


@dataclass(frozen=True)
class EvictionConfig:
    heartbeat_deadline: float = DEFAULT_HEARTBEAT_DEADLINE.total_seconds()
    backoff_base: float = EVICTION_BACKOFF_BASE
    backoff_cap: float = EVICTION_BACKOFF_CAP
    annotate_interceptors: tuple[AnnotateInterceptor, ...] = ()
    # which EvictionRequest API the leader serves and the maintenances request evictions
    # through: "upstream" (lifecycle.k8s.io/v1alpha1), "nodeagent" (our CRD), or "auto" (the
    # upstream one where the server serves it)
    api: str = "auto"
    bridge: BridgeConfig = field(default_factory=BridgeConfig)


@dataclass(frozen=True)
class NodeMaintenanceConfig:
    # nodes draining at once across the cluster: a count, or "20%" of the nodes; None: no limit
    max_draining_nodes: DrainLimit | None = None
    # nodes of one zone draining at once, besides the limit across the cluster; None: no limit
    max_draining_nodes_per_zone: int | None = None
    # the node label that names a node's zone
    zone_label: str = ZONE_LABEL
    # cordon a node whose drain waits for a slot (false: it keeps taking pods meanwhile)
    cordon_while_waiting: bool = False
    # seconds from the start of Drain (spec.drainDeadlineSeconds overrides); None: no deadline
    drain_deadline: float | None = None
    # once the deadline passed: None (report only) or DeletePods (spec.drainDeadlineEscalation
    # overrides)
    drain_deadline_escalation: str = "None"
    # seconds from its creation a node agent's shutdown maintenance counts at most (drain slot,
    # final phase), whatever release deadline it states: at least every node's shutdown.budget
    max_shutdown: float = DEFAULT_MAX_SHUTDOWN

    @property
    def limited(self) -> bool:
        """Some limit on nodes draining at once is set (across the cluster or per zone)."""
        return self.max_draining_nodes is not None or self.max_draining_nodes_per_zone is not None


@dataclass(frozen=True)
class StaticPodConfig:
    enabled: bool = True
    manifest_dir: Path | None = None  # None: from the running kubelet, else the default
    stash_dir: Path | None = None  # None: beside the manifest directory


@dataclass(frozen=True)
class ObservabilityConfig:
    listen: str = "127.0.0.1:9873"  # /healthz /readyz /metrics
    # /healthz and /readyz alone, for the kubelet's probes, on a listener whose connections
    # the clients of listen cannot take; None: none (listen serves them too)
    probe_listen: str | None = None
    # seconds a connection has to send its request before it is closed
    idle_timeout: float = 3.0
    log_format: str = "text"  # text | json
    log_level: str = "INFO"


@dataclass(frozen=True)
class Webhook:
    # the URL and headers often hold the webhook's secret: kept out of repr (and so of logs)
    url: str = field(repr=False)
    events: frozenset[str] = frozenset(notif.EVENTS)
    # None: the default JSON body; a string: a text body; a mapping or list: a JSON body
    template: Any = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = 5.0  # per attempt
    attempts: int = 3


@dataclass(frozen=True)
class NotificationsConfig:
    webhooks: tuple[Webhook, ...] = ()


@dataclass(frozen=True)
class Config:
    node_name: str | None = None  # None: NODE_NAME, host name, then interface addresses
    run_controllers: bool = True  # take part in leader election for the cluster controllers
    # the node-local parts (shutdown guard, static pods, after-reboot completion); false: a
    # controllers-only agent that needs no node (the controllers Deployment)
    run_node_agent: bool = True
    # the KEP-5683 lifecycle conditions and the maintenance Events on the agent's own Node
    node_conditions: bool = True
    kube: KubeConfig = field(default_factory=KubeConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    reboot: RebootConfig = field(default_factory=RebootConfig)
    leader: LeaderConfig = field(default_factory=LeaderConfig)
    eviction: EvictionConfig = field(default_factory=EvictionConfig)
    node_maintenance: NodeMaintenanceConfig = field(default_factory=NodeMaintenanceConfig)
    static_pods: StaticPodConfig = field(default_factory=StaticPodConfig)
    observability: ObservabilityConfig = field(default_factory=ObservabilityConfig)
    notifications: NotificationsConfig = field(default_factory=NotificationsConfig)
