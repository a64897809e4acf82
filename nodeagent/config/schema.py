"""What the agent's configuration is: one frozen dataclass per section, each setting with its
default and its meaning (`metadata={"doc": ...}`, the text of docs/configuration.md, which
`python -m nodeagent.config.reference` writes from here), and the error an invalid
configuration raises."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodeagent.model import notifications as notif
from nodeagent.model.bridge.decision import ASKED_AGAIN_WITHIN
from nodeagent.model.drainslots import DrainLimit
from nodeagent.model.interceptors.heartbeats import DEFAULT_HEARTBEAT_DEADLINE
from nodeagent.model.interceptors.imperative import EVICTION_BACKOFF_BASE, EVICTION_BACKOFF_CAP
from nodeagent.model.names import ZONE_LABEL
from nodeagent.model.shutdown_standing import DEFAULT_MAX_SHUTDOWN
from nodeagent.model.windows import Schedule, parse_windows

__all__ = [
    "DOC",
    "AnnotateInterceptor",
    "BridgeConfig",
    "Config",
    "ConfigError",
    "EvictionConfig",
    "FinalPhaseConfig",
    "GatesConfig",
    "KubeConfig",
    "LeaderConfig",
    "NodeMaintenanceConfig",
    "NotificationsConfig",
    "ObservabilityConfig",
    "PrometheusGateConfig",
    "RebootConfig",
    "ShutdownConfig",
    "StaticPodConfig",
    "Webhook",
]


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file and the field."""


DOC = "doc"
"""The key of a field's `metadata` that holds its meaning for users (Markdown, links relative
to docs/), the one place it is written: docs/configuration.md is generated from it."""


def _doc(text: str) -> Mapping[str, str]:
    return {DOC: " ".join(text.split())}


@dataclass(frozen=True)
class KubeConfig:
    """How the agent reaches the API server."""

    kubeconfig: str | None = field(
        default=None,
        metadata=_doc(
            """kubeconfig file; `null`: `KUBECONFIG`, else the in-cluster configuration, else
            `~/.kube/config`"""
        ),
    )
    max_concurrent_requests: int = field(
        default=16,
        metadata=_doc("bound on API calls in flight (the leader evicts with as many workers)"),
    )
    request_timeout: float = field(
        default=30.0,
        metadata=_doc(
            """seconds per request; less than what `tokenRenewAfter` leaves of a
            `tokenExpiration` token's life"""
        ),
    )
    token_renewal: bool = field(
        default=True,
        metadata=_doc(
            """where the kubeconfig's user reads a Node-bound token from a file (`tokenFile`,
            the `.deb`), ask the TokenRequest API for the next one and write it there"""
        ),
    )
    token_renew_after: float = field(
        default=0.8,
        metadata=_doc("renew once this share of the token's life has passed (0 to 1)"),
    )
    token_expiration: int = field(
        default=3600,
        metadata=_doc(
            """seconds the renewed token lives (the node token policy allows a day at most)"""
        ),
    )


@dataclass(frozen=True)
class FinalPhaseConfig:
    """The last phase of a shutdown whose drain has not finished, as the kubelet's Graceful
    Node Shutdown would do it (its shutdownGracePeriod and shutdownGracePeriodCriticalPods)."""

    grace_period: float = field(
        default=30.0,
        metadata=_doc(
            """this long before the lock goes, the controllers delete the pods still on the node
            as the kubelet's Graceful Node Shutdown would, pods below priority 2000000000 first
            with grace min(theirs, `gracePeriod - criticalPodsGracePeriod`); `0`: off. Set
            longer than `budget - safetyMargin` it is an error; when logind grants less than
            twice the phase, it gets half of the time (both periods scaled). It never moves the
            release"""
        ),
    )
    critical_pods_grace_period: float = field(
        default=10.0,
        metadata=_doc(
            """then, once those are gone or in the last this-many seconds, the critical pods
            with grace min(theirs, this). Never mirror (static) pods, pods annotated
            `nodeagent.io/drain: skip`, pods terminating or terminal"""
        ),
    )


@dataclass(frozen=True)
class ShutdownConfig:
    """The shutdown guard: the logind delay lock and the shutdown maintenance."""

    enabled: bool = field(default=True, metadata=_doc("hold the logind shutdown lock"))
    budget: float = field(
        default=600.0,
        metadata=_doc(
            """the longest a shutdown may wait, in seconds (written to logind's
            `InhibitDelayMaxSec` in the drop-in)"""
        ),
    )
    safety_margin: float = field(
        default=10.0,
        metadata=_doc(
            """release the lock this long before the budget runs out, so logind never kills
            the wait; less than `budget`"""
        ),
    )
    api_unreachable_release_after: float = field(
        default=30.0,
        metadata=_doc(
            """release when the API server has not answered for this long during a shutdown
            (a request that hangs counts, as does one refused)"""
        ),
    )
    logind_dropin: Path = field(
        default=Path("/etc/systemd/logind.conf.d/zz-nodeagent.conf"),
        metadata=_doc("where the logind drop-in is written"),
    )
    manage_dropin: bool = field(
        default=True, metadata=_doc("write the logind drop-in and reload logind")
    )
    complete_after_reboot: bool = field(
        default=True,
        metadata=_doc(
            """once the node is Ready after a reboot, complete and delete the agent's shutdown
            maintenances of earlier boots"""
        ),
    )
    dbus_address: str | None = field(
        default=None,
        metadata=_doc(
            """D-Bus address; `null`: the system bus (a DaemonSet uses the mounted host
            socket)"""
        ),
    )
    drain_plan: tuple[Mapping[str, Any], ...] = field(
        default=(),
        metadata=_doc(
            """`spec.drainPlan` of the shutdown maintenance (KEP-4212 entries; the KEP defaults
            fill in the rest), e.g. `[{podPriority: 1000}, {podPriority: 100000}]` to drain
            those priorities in turn"""
        ),
    )
    record_file: Path | None = field(
        default=None,
        metadata=_doc(
            """when this boot's shutdown began, so an agent restarted during it keeps the same
            bounds (on `/run`: per boot); `null`: `shutdown.json` in `$RUNTIME_DIRECTORY` (the
            unit's `/run/nodeagent`), not recorded without it"""
        ),
    )
    final_phase: FinalPhaseConfig = field(default_factory=FinalPhaseConfig)


@dataclass(frozen=True)
class RebootConfig:
    """Coordinated reboots: a reboot asked for on the node (a reboot-required sentinel, a
    sentinel command, `nodeagent reboot`) becomes a NodeMaintenance that waits for its drain
    slot and drains; once Drained the agent reboots the node through logind."""

    enabled: bool = field(
        default=False,
        metadata=_doc(
            """ask for and carry out coordinated reboots of this node (off unless opted into:
            an agent that reboots its node by itself must be asked to;
            [fleet.md](fleet.md#coordinated-reboots-replacing-kured))"""
        ),
    )
    sentinel: Path | None = field(
        default=Path("/var/run/reboot-required"),
        metadata=_doc(
            """a reboot is required while this file exists, written in this boot (Debian's and
            Ubuntu's, as kured's default); watched, never polled. A file last written before
            this boot began is stale. `null`: none"""
        ),
    )
    sentinel_command: tuple[str, ...] | None = field(
        default=None,
        metadata=_doc(
            """also required while this command exits 0 (as kured's
            `--reboot-sentinel-command`): a command line (split as a shell would, no shell runs
            it) or a list of arguments; `null`: none"""
        ),
    )
    check_interval: float = field(
        default=60.0,
        metadata=_doc(
            "seconds between runs of the sentinel command (at least 1; a command cannot be watched)"
        ),
    )
    command_timeout: float = field(
        default=10.0,
        metadata=_doc(
            """seconds a run of the sentinel command may take (at most `checkInterval`); then
            it is killed and counts as not required"""
        ),
    )
    request_file: Path = field(
        default=Path("/run/nodeagent/reboot-requested"),
        metadata=_doc(
            """the file `nodeagent reboot` writes (its reason inside) and `--cancel` removes;
            watched"""
        ),
    )


@dataclass(frozen=True)
class LeaderConfig:
    """Leader election of the cluster controllers, through a Lease."""

    namespace: str = field(
        default="nodeagent-system",
        metadata=_doc(
            """the Lease's namespace (where `packaging/kubernetes` grants it). It must exist: no
            agent leads until it does
            ([install.md](install.md#the-crds-and-the-namespace-alone): `nodeagent manifests
            namespace`)"""
        ),
    )
    lease_name: str = field(default="nodeagent-controllers", metadata=_doc("the Lease's name"))
    lease_duration: float = field(
        default=15.0,
        metadata=_doc(
            """as client-go's leader election: `retryPeriod` times 1.2 (its jitter) <
            `renewDeadline` < `leaseDuration`"""
        ),
    )
    renew_deadline: float = field(default=10.0, metadata=_doc("as client-go's (above)"))
    retry_period: float = field(default=2.0, metadata=_doc("as client-go's (above)"))


@dataclass(frozen=True)
class AnnotateInterceptor:
    """An annotate-and-wait interceptor (the Eviction Reschedule Hook pattern)."""

    name: str = field(
        metadata=_doc(
            """the interceptor's name, unique and not `*.k8s.io` (checked when the file is
            read); upstream its responder is `annotate.nodeagent.io/<name>`"""
        )
    )
    pod_selector: Mapping[str, Any] = field(
        metadata=_doc("a label selector (`matchLabels`, `matchExpressions`): the pods it covers")
    )
    annotation_key: str = field(
        metadata=_doc(
            """the annotation put on a pod whose turn it is; the interceptor then waits until
            the pod with that UID is gone"""
        )
    )
    annotation_value: str = field(default="true", metadata=_doc("the annotation's value"))


@dataclass(frozen=True)
class BridgeConfig:
    """The eviction bridge: the pods/eviction webhook every controllers replica serves, leader
    or not, so that kubectl drain and the autoscalers wait for interceptors."""

    enabled: bool = field(
        default=False,
        metadata=_doc(
            """serve the [eviction bridge](eviction-bridge.md)'s `pods/eviction` webhook on
            every controllers replica, leader or not; needs `runControllers: true`"""
        ),
    )
    port: int = field(
        default=8443,
        metadata=_doc(
            """its HTTPS port, on every address (the Deployment's container port `bridge`, the
            webhook Service's targetPort); not a port of `observability`"""
        ),
    )
    daemon_set_pods: bool = field(
        default=False,
        metadata=_doc(
            """also hold evictions of DaemonSet pods for `daemonset.apps.k8s.io` (it acts only
            within a NodeMaintenance, so a plain drain would wait for one)"""
        ),
    )
    static_pods: bool = field(
        default=False,
        metadata=_doc(
            """also hold evictions of mirror pods for `kubelet.k8s.io` (it acts only within a
            NodeMaintenance, so a plain drain would wait for one)"""
        ),
    )
    asked_again_within: float = field(
        default=ASKED_AGAIN_WITHIN.total_seconds(),
        metadata=_doc(
            """seconds within which an eviction of a pod with interceptors must be asked for
            again before the bridge asks for it with an EvictionRequest: one nobody retries
            (a one-off call, a forged review) writes nothing and sets no interceptor to work;
            `kubectl drain` retries every 5 s (each replica remembers only the attempts it
            answered)"""
        ),
    )
    own_users: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            """users whose evictions always pass, besides the controllers' own ServiceAccount
            (`system:serviceaccount:<leader.namespace>:nodeagent-controllers`, whose imperative
            evictions these are)"""
        ),
    )
    webhook_configuration: str | None = field(
        default="nodeagent-eviction-bridge",
        metadata=_doc(
            """the ValidatingWebhookConfiguration whose `caBundle` the controllers keep;
            `null`: something else puts the CA there"""
        ),
    )
    certificates: str = field(
        default="managed",
        metadata=_doc(
            """`managed`: the controllers make and renew a self-signed CA and serving
            certificate in the Secret `nodeagent-eviction-bridge-tls`; `provided`: someone else
            (cert-manager's Certificate) keeps that Secret (`tls.crt`, `tls.key`, `ca.crt`) and
            the controllers only read it
            ([eviction-bridge.md](eviction-bridge.md#with-cert-manager))"""
        ),
    )
    client_ca_file: Path | None = field(
        default=None,
        metadata=_doc(
            """a PEM file (absolute path) of the CA that signs kube-apiserver's client
            certificate for the webhook: the bridge then asks every connection for a
            certificate that CA signed and refuses the others in the TLS handshake
            ([security.md](security.md#what-the-eviction-bridge-trusts)); `null`: any client"""
        ),
    )


@dataclass(frozen=True)
class EvictionConfig:
    """EvictionRequests: interceptors' heartbeats, the imperative eviction's retries, which
    API, the annotate-and-wait interceptors and the eviction bridge."""

    heartbeat_deadline: float = field(
        default=DEFAULT_HEARTBEAT_DEADLINE.total_seconds(),
        metadata=_doc(
            """an interceptor that neither heartbeats nor completes for this long is passed
            over. From `120` (room for our interceptors' heartbeat interval, a quarter of the
            deadline from 60 to 180 s, plus the 60 s the API server keeps between heartbeats)
            to `604800` (7 days)"""
        ),
    )
    backoff_base: float = field(
        default=EVICTION_BACKOFF_BASE,
        metadata=_doc(
            """retry of refused evictions (429 from a PodDisruptionBudget): the first wait;
            0 < `backoffBase` <= `backoffCap`"""
        ),
    )
    backoff_cap: float = field(
        default=EVICTION_BACKOFF_CAP, metadata=_doc("the longest wait between retries")
    )
    annotate_interceptors: tuple[AnnotateInterceptor, ...] = field(
        default=(),
        metadata=_doc(
            """`{name, podSelector, annotationKey, annotationValue}` each: annotate matching
            pods and wait until the pod with that UID is gone (the Eviction Reschedule Hook
            pattern); the entries' settings are in the next table"""
        ),
    )
    api: str = field(
        default="auto",
        metadata=_doc(
            """which EvictionRequest API the leader serves and the maintenances request
            evictions through: `auto` the upstream `lifecycle.k8s.io/v1alpha1` where the server
            serves it, else our CRD; `upstream` or `nodeagent` to insist
            ([upstream-api.md](upstream-api.md))"""
        ),
    )
    lifecycle_controller: str = field(
        default="auto",
        metadata=_doc(
            """on the upstream API, who runs its evictionrequest controller and imperative
            evictor: `nodeagent`, or `kubernetes` (kube-controller-manager; nodeagent then
            requests and responds only); `auto` Kubernetes where the ServiceAccount
            `kube-system/evictionrequest-controller` exists, else nodeagent
            ([upstream-api.md](upstream-api.md#two-controllers))"""
        ),
    )
    bridge: BridgeConfig = field(default_factory=BridgeConfig)


@dataclass(frozen=True)
class PrometheusGateConfig:
    """The Prometheus gate: the next reboot asked for waits while an alert counts, read from
    Prometheus's `GET /api/v1/alerts` as kured reads it."""

    url: str | None = field(
        default=None,
        metadata=_doc(
            """Prometheus's base URL (`http://prometheus.monitoring:9090`, as kured's
            `--prometheus-url`); `null`: no Prometheus gate"""
        ),
    )
    alert_filter: str | None = field(
        default=None,
        metadata=_doc(
            """a regular expression on `alertname`: matching alerts are ignored (kured's
            `--alert-filter-regexp`), or are the only ones counted with `alertFilterMatchOnly`;
            `null`: every alert counts"""
        ),
    )
    alert_filter_match_only: bool = field(
        default=False,
        metadata=_doc(
            """count only the alerts `alertFilter` matches (kured's
            `--alert-filter-match-only`)"""
        ),
    )
    firing_only: bool = field(
        default=False,
        metadata=_doc(
            """count firing alerts only (kured's `--alert-firing-only`); `false`: pending ones
            too"""
        ),
    )
    interval: float = field(
        default=30.0,
        metadata=_doc(
            """seconds between two reads while a reboot asked for waits for its admission;
            none at all while none waits"""
        ),
    )
    timeout: float = field(
        default=10.0,
        metadata=_doc(
            """seconds a read may take; longer, or unreachable, or an answer that is not
            Prometheus's: the gate cannot be evaluated and holds the fleet"""
        ),
    )


@dataclass(frozen=True)
class GatesConfig:
    """Gates between nodes: the next reboot asked for is admitted to a drain slot only while
    every gate holds. A gate that cannot be evaluated holds the fleet and says so."""

    prometheus: PrometheusGateConfig = field(default_factory=PrometheusGateConfig)
    pods_ready: tuple[Mapping[str, Any], ...] = field(
        default=(),
        metadata=_doc(
            """`[{namespace, selector}]`: every pod of the namespace the label selector
            matches is Ready (read from the controllers' pod cache), e.g. `[{namespace: db,
            selector: {matchLabels: {app: etcd}}}]`"""
        ),
    )

    @property
    def configured(self) -> bool:
        return self.prometheus.url is not None or bool(self.pods_ready)


@dataclass(frozen=True)
class NodeMaintenanceConfig:
    """The NodeMaintenance controller's limits, deadlines and zones (the controllers'
    configuration)."""

    max_draining_nodes: DrainLimit | None = field(
        default=None,
        metadata=_doc(
            """nodes draining at once across the cluster: a count (`1`) or a share of the
            nodes (`"20%"`, rounded down, at least 1); `null`: no limit
            ([fleet.md](fleet.md#draining-a-few-nodes-at-a-time))"""
        ),
    )
    max_draining_nodes_per_zone: int | None = field(
        default=None,
        metadata=_doc(
            """nodes of one zone draining at once, besides `maxDrainingNodes` (or alone); a
            node whose zone is full waits without holding back other zones; null: no limit
            ([fleet.md](fleet.md#zones))"""
        ),
    )
    zone_label: str = field(
        default=ZONE_LABEL, metadata=_doc("the node label that names a node's zone")
    )
    cordon_while_waiting: bool = field(
        default=False,
        metadata=_doc(
            """cordon a node while it waits for a drain slot (`false`: it keeps taking pods
            until its turn)"""
        ),
    )
    drain_deadline: float | None = field(
        default=None,
        metadata=_doc(
            """seconds from the start of Drain after which a drain with pods left is reported
            (a maintenance's `spec.drainDeadlineSeconds` overrides it); `null`: no deadline
            ([fleet.md](fleet.md#drain-deadlines))"""
        ),
    )
    drain_deadline_escalation: str = field(
        default="None",
        metadata=_doc(
            """once the deadline passed: `None` (report only) or `DeletePods` (delete the
            Default pods left, past their budgets); a maintenance's
            `spec.drainDeadlineEscalation` overrides it"""
        ),
    )
    max_shutdown: float = field(
        default=DEFAULT_MAX_SHUTDOWN,
        metadata=_doc(
            """seconds from its creation a node agent's shutdown maintenance counts at most for
            a drain slot and the final phase, whatever release deadline it states; at least
            every node's `shutdown.budget` (an agent that runs both parts refuses a budget over
            it); see [security.md](security.md#what-a-shutdown-maintenance-can-claim)"""
        ),
    )
    reboot_windows: tuple[Mapping[str, Any], ...] = field(
        default=(),
        metadata=_doc(
            """when reboots asked for are admitted to a drain slot: `[{days: [Sat, Sun],
            start: "22:00", end: "04:00", timeZone: Europe/Berlin}]` (wall-clock time of the
            zone, default UTC; an end at or before the start crosses midnight); `[]`: always.
            Shutdowns under way and admins' maintenances are not held"""
        ),
    )
    window_end: str = field(
        default="Finish",
        metadata=_doc(
            """a reboot's drain not finished when the windows close: `Finish` (it goes on) or
            `Stop` (its slot given back, its EvictionRequests withdrawn, its node uncordoned;
            it resumes where it stopped in the next window)"""
        ),
    )
    gates: GatesConfig = field(default_factory=GatesConfig)

    @property
    def limited(self) -> bool:
        """Some limit on nodes draining at once is set (across the cluster or per zone), or
        windows or gates, which take every drain into account."""
        return (
            self.max_draining_nodes is not None
            or self.max_draining_nodes_per_zone is not None
            or bool(self.reboot_windows)
            or self.gates.configured
        )

    @property
    def schedule(self) -> Schedule:
        """``reboot_windows`` as the model reads them (checked when loaded)."""
        return parse_windows(list(self.reboot_windows), "nodeMaintenance.rebootWindows")


@dataclass(frozen=True)
class StaticPodConfig:
    """The `kubelet.k8s.io` interceptor: static pods' manifests moved aside and back."""

    enabled: bool = field(default=True, metadata=_doc("the `kubelet.k8s.io` interceptor"))
    manifest_dir: Path | None = field(
        default=None,
        metadata=_doc(
            """the kubelet's static pod directory; `null`: `--pod-manifest-path` or
            `staticPodPath` of the running kubelet, else `/etc/kubernetes/manifests`"""
        ),
    )
    stash_dir: Path | None = field(
        default=None,
        metadata=_doc(
            """where moved-aside manifests wait: inside the manifest directory under a dot name
            (the kubelet skips it), or beside it; on the same mount (rename). Inside is what the
            DaemonSet and the unit allow: they let the agent write the manifest directory only.
            `null`: `<manifestDir>/.nodeagent-stash`"""
        ),
    )


@dataclass(frozen=True)
class ObservabilityConfig:
    """Health, metrics and logs."""

    listen: str = field(
        default="127.0.0.1:9873",
        metadata=_doc(
            """`/healthz`, `/readyz` (lock held), `/metrics`; the shipped manifests say
            `0.0.0.0:9873` (Prometheus scrapes the pod's IP)"""
        ),
    )
    probe_listen: str | None = field(
        default=None,
        metadata=_doc(
            """`/healthz` and `/readyz` alone, for the kubelet's probes, on a listener the
            clients of `listen` cannot crowd out (so not on `listen`'s port); the manifests'
            probes use `0.0.0.0:9874`; `null`: none (`listen` serves them too)"""
        ),
    )
    idle_timeout: float = field(
        default=3.0,
        metadata=_doc(
            """seconds a connection has to send its request before it is closed (at most 60);
            each listener also serves 64 connections at once, 8 of one source address"""
        ),
    )
    log_format: str = field(default="text", metadata=_doc("`text`, or `json` for log pipelines"))
    log_level: str = field(
        default="INFO",
        metadata=_doc("`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL` (`--log-level` wins)"),
    )


@dataclass(frozen=True)
class Webhook:
    """A webhook told of a node's shutdown and return."""

    # the URL and headers often hold the webhook's secret: kept out of repr (and so of logs)
    url: str = field(
        repr=False,
        metadata=_doc(
            """`http` or `https` URL the JSON POST goes to (logs show only its scheme, host and
            port)"""
        ),
    )
    events: frozenset[str] = field(
        default=frozenset(notif.EVENTS),
        metadata=_doc("which of `drainStarted`, `lockReleased`, `nodeBack` it is told of"),
    )
    template: Any = field(
        default=None,
        metadata=_doc(
            """a Python `string.Template` (`${event}`, `${node}`, `${maintenance}`,
            `${reason}`, `${time}`): a mapping or list is a JSON body, a string a `text/plain`
            body; `null`: the default JSON body
            ([operations.md](operations.md#notifications))"""
        ),
    )
    headers: Mapping[str, str] = field(
        default_factory=dict,
        repr=False,
        metadata=_doc(
            "extra request headers (e.g. `Authorization`); a configured `Content-Type` wins"
        ),
    )
    timeout: float = field(default=5.0, metadata=_doc("seconds per attempt"))
    attempts: int = field(
        default=3,
        metadata=_doc(
            """at most this many attempts (at most 10): a 5xx, 408, 429 or no answer is tried
            again after 0.5 s, 1 s, 2 s ... (at most 8 s)"""
        ),
    )


@dataclass(frozen=True)
class NotificationsConfig:
    """Webhook notifications of each node's shutdowns."""

    webhooks: tuple[Webhook, ...] = field(
        default=(),
        metadata=_doc(
            """webhooks told of this node's shutdown and return (at most 16); the entries'
            settings are in the next table ([operations.md](operations.md#notifications))"""
        ),
    )


@dataclass(frozen=True)
class Config:
    """The whole configuration: four settings of the agent and one section per concern."""

    node_name: str | None = field(
        default=None,
        metadata=_doc(
            """the Node this agent runs on; `null`: `NODE_NAME`, the host name, then the Node
            whose `status.addresses` lists one of this host's interface addresses"""
        ),
    )
    run_controllers: bool = field(
        default=True,
        metadata=_doc(
            """take part in leader election for the cluster controllers (the DaemonSet and the
            `.deb`'s configuration say `false`: a node's credentials are for its node)"""
        ),
    )
    run_node_agent: bool = field(
        default=True,
        metadata=_doc(
            """run this node's part (shutdown guard, static pods, completion after a reboot);
            `false`: a controllers-only agent that needs no node (the Deployment); its leader
            identity is `POD_NAME`, else the host name"""
        ),
    )
    node_conditions: bool = field(
        default=True,
        metadata=_doc(
            """keep the KEP-5683 lifecycle conditions and the maintenance Events on this
            node's Node ([operations.md](operations.md#node-conditions-and-events-kep-5683));
            `false`: neither (conditions written before stay as they are)"""
        ),
    )
    kube: KubeConfig = field(default_factory=KubeConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    reboot: RebootConfig = field(default_factory=RebootConfig)
    leader: LeaderConfig = field(default_factory=LeaderConfig)
    eviction: EvictionConfig = field(default_factory=EvictionConfig)
    node_maintenance: NodeMaintenanceConfig = field(default_factory=NodeMaintenanceConfig)
    static_pods: StaticPodConfig = field(default_factory=StaticPodConfig)
    observability: ObservabilityConfig = field(default_factory=ObservabilityConfig)
    notifications: NotificationsConfig = field(default_factory=NotificationsConfig)
