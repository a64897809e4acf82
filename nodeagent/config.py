"""Agent configuration: frozen dataclasses, a YAML loader, validation with clear errors.

The file is YAML with one section per concern (all optional); unknown keys are errors, so a
typo never silently falls back to a default. Durations are seconds (int or float).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import yaml

from nodeagent.model import notifications as notif
from nodeagent.model.drainplan import InvalidPlan, effective_plan
from nodeagent.model.drainslots import DrainLimit, InvalidLimit
from nodeagent.model.interceptors.heartbeats import (
    DEFAULT_HEARTBEAT_DEADLINE,
    MIN_HEARTBEAT_INTERVAL,
    heartbeat_interval,
)
from nodeagent.model.interceptors.imperative import EVICTION_BACKOFF_BASE, EVICTION_BACKOFF_CAP
from nodeagent.model.interceptors.targets import validate_interceptor_name
from nodeagent.model.leader import JITTER
from nodeagent.model.maintenance import ESCALATIONS
from nodeagent.model.selectors import (
    DNS_SUBDOMAIN,
    DNS_SUBDOMAIN_MAX,
    SelectorError,
    label_selector_from_dict,
    validate_label_key,
)
from nodeagent.model.token import MAX_EXPIRATION, MIN_EXPIRATION


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
class EvictionConfig:
    heartbeat_deadline: float = DEFAULT_HEARTBEAT_DEADLINE.total_seconds()
    backoff_base: float = EVICTION_BACKOFF_BASE
    backoff_cap: float = EVICTION_BACKOFF_CAP
    annotate_interceptors: tuple[AnnotateInterceptor, ...] = ()


@dataclass(frozen=True)
class NodeMaintenanceConfig:
    # nodes draining at once across the cluster: a count, or "20%" of the nodes; None: no limit
    max_draining_nodes: DrainLimit | None = None
    # cordon a node whose drain waits for a slot (false: it keeps taking pods meanwhile)
    cordon_while_waiting: bool = False
    # seconds from the start of Drain (spec.drainDeadlineSeconds overrides); None: no deadline
    drain_deadline: float | None = None
    # once the deadline passed: None (report only) or DeletePods (spec.drainDeadlineEscalation
    # overrides)
    drain_deadline_escalation: str = "None"


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
    leader: LeaderConfig = field(default_factory=LeaderConfig)
    eviction: EvictionConfig = field(default_factory=EvictionConfig)
    node_maintenance: NodeMaintenanceConfig = field(default_factory=NodeMaintenanceConfig)
    static_pods: StaticPodConfig = field(default_factory=StaticPodConfig)
    observability: ObservabilityConfig = field(default_factory=ObservabilityConfig)
    notifications: NotificationsConfig = field(default_factory=NotificationsConfig)


T = TypeVar("T")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_CONCURRENT_REQUESTS = 256
_SECTIONS: dict[str, type[Any]] = {
    "kube": KubeConfig,
    "shutdown": ShutdownConfig,
    "leader": LeaderConfig,
    "eviction": EvictionConfig,
    "node_maintenance": NodeMaintenanceConfig,
    "static_pods": StaticPodConfig,
    "observability": ObservabilityConfig,
    "notifications": NotificationsConfig,
}
# each webhook has a worker of its own (deliveries to one go in order): this bounds them
MAX_WEBHOOKS = 16
MAX_ATTEMPTS = 10
# a longer wait for a request lets idle connections hold the health port's slots longer
MAX_IDLE_TIMEOUT = 60
# beyond this a deadline is none (and far beyond it, times past it no longer fit a datetime)
MAX_HEARTBEAT_DEADLINE = 7 * 24 * 3600
# a namespace's name (RFC 1123 label)
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")


def _snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _coerce(where: str, value: Any, default: Any, annotation: str) -> Any:
    """Coerce one YAML value to the type of the field's default/annotation."""
    if "Path" in annotation:
        if value is None and "None" in annotation:
            return None
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: must be a path, got {value!r}")
        return Path(value)
    if "bool" in annotation:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false, got {value!r}")
        return value
    if "float" in annotation:
        if value is None and "None" in annotation:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: must be a number of seconds, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{where}: must be a finite number of seconds, got {value!r}")
        return float(value)
    if "int" in annotation:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: must be an integer, got {value!r}")
        return value
    if "str" in annotation:
        if value is None and "None" in annotation:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a string, got {value!r}")
        return value
    return value


def _section(cls: type[T], raw: Any, where: str) -> T:
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        name = _camel_to_snake(str(key))
        f = fields.get(name)
        if f is None:
            known = ", ".join(sorted(_snake_to_camel(n) for n in fields))
            raise ConfigError(f"{where}.{key}: unknown setting (known: {known})")
        if name == "annotate_interceptors":
            kwargs[name] = _interceptors(value, f"{where}.{key}")
            continue
        if name == "drain_plan":
            kwargs[name] = _drain_plan(value, f"{where}.{key}")
            continue
        if name == "max_draining_nodes":
            kwargs[name] = _drain_limit(value, f"{where}.{key}")
            continue
        if name == "webhooks":
            kwargs[name] = _webhooks(value, f"{where}.{key}")
            continue
        if name == "final_phase":
            kwargs[name] = _section(FinalPhaseConfig, value, f"{where}.{key}")
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        kwargs[name] = _coerce(f"{where}.{key}", value, default, str(f.type))
    return cls(**kwargs)


def _interceptors(raw: Any, where: str) -> tuple[AnnotateInterceptor, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list")
    out: list[AnnotateInterceptor] = []
    for i, item in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{w}: must be a mapping")
        unknown = set(item) - {"name", "podSelector", "annotationKey", "annotationValue"}
        if unknown:
            raise ConfigError(f"{w}.{sorted(unknown)[0]}: unknown setting")
        for req in ("name", "podSelector", "annotationKey"):
            if req not in item:
                raise ConfigError(f"{w}.{req}: required")
        if not isinstance(item["name"], str) or not DNS_SUBDOMAIN.fullmatch(item["name"]):
            raise ConfigError(f"{w}.name: must be a DNS subdomain like mover.example.com")
        if (why := validate_interceptor_name(item["name"])) is not None:
            raise ConfigError(f"{w}.name: {item['name']!r} {why}")
        if any(item["name"] == i.name for i in out):
            raise ConfigError(f"{w}.name: {item['name']} is repeated")
        if not isinstance(item["podSelector"], Mapping):
            raise ConfigError(f"{w}.podSelector: must be a label selector mapping")
        try:
            label_selector_from_dict(item["podSelector"])
        except SelectorError as e:
            raise ConfigError(f"{w}.podSelector: {e}") from None
        if (why := validate_label_key(str(item["annotationKey"]))) is not None:
            raise ConfigError(f"{w}.annotationKey: {item['annotationKey']!r} {why}")
        out.append(
            AnnotateInterceptor(
                name=item["name"],
                pod_selector=dict(item["podSelector"]),
                annotation_key=str(item["annotationKey"]),
                annotation_value=str(item.get("annotationValue", "true")),
            )
        )
    return tuple(out)


def _webhooks(raw: Any, where: str) -> tuple[Webhook, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list of webhooks")
    if len(raw) > MAX_WEBHOOKS:
        raise ConfigError(f"{where}: at most {MAX_WEBHOOKS} webhooks, got {len(raw)}")
    return tuple(_webhook(item, f"{where}[{i}]") for i, item in enumerate(raw))


def _webhook(item: Any, where: str) -> Webhook:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: must be a mapping with at least url")
    known = ("url", "events", "template", "headers", "timeout", "attempts")
    for key in item:
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown setting (known: {', '.join(known)})")
    if "url" not in item:
        raise ConfigError(f"{where}.url: required")
    try:
        url = notif.check_url(item["url"])
    except notif.InvalidSetting as e:
        raise ConfigError(f"{where}.url: {e}") from None
    events = frozenset(notif.EVENTS)
    if "events" in item:
        raw = item["events"]
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{where}.events: must be a list of one or more events")
        for event in raw:
            if event not in notif.EVENTS:
                raise ConfigError(
                    f"{where}.events: {event!r} is not an event (known: {', '.join(notif.EVENTS)})"
                )
        events = frozenset(raw)
    template = item.get("template")
    if template is not None:
        try:
            notif.check_template(template)
        except notif.InvalidSetting as e:
            raise ConfigError(f"{where}.template{'' if str(e)[0] in '.[' else ': '}{e}") from None
    headers = item.get("headers") or {}
    if not isinstance(headers, Mapping):
        raise ConfigError(f"{where}.headers: must be a mapping of header names to values")
    for name, value in headers.items():
        try:
            notif.check_header(name, value)
        except notif.InvalidSetting as e:
            raise ConfigError(f"{where}.headers: {e}") from None
    timeout = _coerce(f"{where}.timeout", item.get("timeout", 5.0), 5.0, "float")
    if timeout <= 0:
        raise ConfigError(f"{where}.timeout: must be positive")
    attempts = _coerce(f"{where}.attempts", item.get("attempts", 3), 3, "int")
    if not 1 <= attempts <= MAX_ATTEMPTS:
        raise ConfigError(f"{where}.attempts: must be from 1 to {MAX_ATTEMPTS}")
    return Webhook(url, events, template, dict(headers), timeout, attempts)


def _drain_limit(raw: Any, where: str) -> DrainLimit | None:
    if raw is None:
        return None
    try:
        return DrainLimit.parse(raw)
    except InvalidLimit as e:
        raise ConfigError(f"{where}: {e}") from None


def _drain_plan(raw: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(raw, list) or not all(isinstance(e, Mapping) for e in raw):
        raise ConfigError(f"{where}: must be a list of drain plan entries")
    try:
        effective_plan(raw)
    except InvalidPlan as e:
        # the model names entries spec.drainPlan[i]; here they are this setting's
        raise ConfigError(str(e).replace("spec.drainPlan", where)) from e
    return tuple(dict(e) for e in raw)


def validate_config(cfg: Config) -> None:
    """Cross-field rules; raises ConfigError naming the field."""
    s = cfg.shutdown
    if s.budget <= 0:
        raise ConfigError("shutdown.budget: must be positive")
    if not 0 <= s.safety_margin < s.budget:
        raise ConfigError(
            f"shutdown.safetyMargin ({s.safety_margin:g}s) must be at least 0 and less than "
            f"shutdown.budget ({s.budget:g}s): the lock is released that long before the budget"
        )
    if s.api_unreachable_release_after <= 0:
        raise ConfigError("shutdown.apiUnreachableReleaseAfter: must be positive")
    fp = s.final_phase
    if not 0 <= fp.critical_pods_grace_period <= fp.grace_period:
        raise ConfigError(
            "shutdown.finalPhase: must have 0 <= criticalPodsGracePeriod <= gracePeriod "
            f"(got {fp.critical_pods_grace_period:g}, {fp.grace_period:g})"
        )
    # the defaults fit any budget (a phase over half of it is scaled down); a set one must fit
    if fp != FinalPhaseConfig() and fp.grace_period > s.budget - s.safety_margin:
        raise ConfigError(
            f"shutdown.finalPhase.gracePeriod: {fp.grace_period:g}s is longer than "
            f"shutdown.budget - shutdown.safetyMargin ({s.budget - s.safety_margin:g}s)"
        )
    ld = cfg.leader
    if not 0 < ld.retry_period < ld.renew_deadline < ld.lease_duration:
        raise ConfigError(
            "leader: must have 0 < retryPeriod < renewDeadline < leaseDuration "
            f"(got {ld.retry_period}, {ld.renew_deadline}, {ld.lease_duration})"
        )
    if ld.renew_deadline <= JITTER * ld.retry_period:
        raise ConfigError(
            f"leader.renewDeadline ({ld.renew_deadline:g}s) must be more than {JITTER:g} times "
            f"leader.retryPeriod ({ld.retry_period:g}s): a jittered retry comes that late"
        )
    if not DNS_LABEL.fullmatch(ld.namespace):
        raise ConfigError(f"leader.namespace: {ld.namespace!r} is not a namespace name")
    if len(ld.lease_name) > DNS_SUBDOMAIN_MAX or not DNS_SUBDOMAIN.fullmatch(ld.lease_name):
        raise ConfigError(f"leader.leaseName: {ld.lease_name!r} is not a Lease name")
    if not 1 <= cfg.kube.max_concurrent_requests <= MAX_CONCURRENT_REQUESTS:
        raise ConfigError(
            f"kube.maxConcurrentRequests: must be from 1 to {MAX_CONCURRENT_REQUESTS}"
        )
    if cfg.kube.request_timeout <= 0:
        raise ConfigError("kube.requestTimeout: must be positive")
    if not 0 < cfg.kube.token_renew_after < 1:
        raise ConfigError("kube.tokenRenewAfter: must be a share of the token's life (0 to 1)")
    if not MIN_EXPIRATION <= cfg.kube.token_expiration <= MAX_EXPIRATION:
        raise ConfigError(
            f"kube.tokenExpiration: must be from {MIN_EXPIRATION} to {MAX_EXPIRATION} seconds"
        )
    left = (1 - cfg.kube.token_renew_after) * cfg.kube.token_expiration
    if left <= cfg.kube.request_timeout:
        raise ConfigError(
            f"kube.tokenRenewAfter ({cfg.kube.token_renew_after:g}) leaves {left:g}s of a "
            f"kube.tokenExpiration ({cfg.kube.token_expiration}s) token's life to renew it in, "
            f"not more than kube.requestTimeout ({cfg.kube.request_timeout:g}s): one hung "
            "request outlives the token"
        )
    deadline = cfg.node_maintenance.drain_deadline
    if deadline is not None and deadline <= 0:
        raise ConfigError("nodeMaintenance.drainDeadline: must be positive")
    if cfg.node_maintenance.drain_deadline_escalation not in ESCALATIONS:
        raise ConfigError(
            "nodeMaintenance.drainDeadlineEscalation: must be one of " + ", ".join(ESCALATIONS)
        )
    _check_heartbeat_deadline(cfg.eviction.heartbeat_deadline)
    ev = cfg.eviction
    if not 0 < ev.backoff_base <= ev.backoff_cap:
        raise ConfigError(
            f"eviction.backoffBase ({ev.backoff_base:g}s) must be positive and at most "
            f"eviction.backoffCap ({ev.backoff_cap:g}s)"
        )
    if cfg.observability.log_format not in ("text", "json"):
        raise ConfigError("observability.logFormat: must be text or json")
    if cfg.observability.log_level.upper() not in LOG_LEVELS:
        raise ConfigError(
            f"observability.logLevel: {cfg.observability.log_level!r} is not one of "
            f"{', '.join(LOG_LEVELS)}"
        )
    _listen_address("observability.listen", cfg.observability.listen)
    if cfg.observability.probe_listen is not None:
        _listen_address("observability.probeListen", cfg.observability.probe_listen)
        if _same_port(cfg.observability.listen, cfg.observability.probe_listen):
            raise ConfigError(
                f"observability.probeListen ({cfg.observability.probe_listen}) must not take "
                f"the port of observability.listen ({cfg.observability.listen})"
            )
    if not 0 < cfg.observability.idle_timeout <= MAX_IDLE_TIMEOUT:
        raise ConfigError(
            f"observability.idleTimeout: must be positive and at most {MAX_IDLE_TIMEOUT} seconds"
        )
    if not cfg.run_node_agent and not cfg.run_controllers:
        raise ConfigError("runNodeAgent: false with runControllers: false leaves nothing to run")
    if cfg.node_name is not None and not DNS_SUBDOMAIN.fullmatch(cfg.node_name):
        raise ConfigError(f"nodeName: {cfg.node_name!r} is not a valid node name")


def _check_heartbeat_deadline(deadline: float) -> None:
    """Every interceptor must be able to heartbeat in time: ours report every
    heartbeat_interval (the static pods' every MIN_HEARTBEAT_INTERVAL), and the API server
    refuses heartbeats closer than MIN_HEARTBEAT_INTERVAL, so one that comes late cannot make
    up for it sooner: the deadline leaves one more spacing of room."""
    if deadline > MAX_HEARTBEAT_DEADLINE:
        raise ConfigError(
            f"eviction.heartbeatDeadline ({deadline:g}s) must be at most "
            f"{MAX_HEARTBEAT_DEADLINE}s (7 days)"
        )
    interval = heartbeat_interval(timedelta(seconds=max(deadline, 0))).total_seconds()
    spacing = MIN_HEARTBEAT_INTERVAL.total_seconds()
    if deadline < interval + spacing:
        raise ConfigError(
            f"eviction.heartbeatDeadline ({deadline:g}s) must leave room for an interceptor's "
            f"heartbeat interval ({interval:g}s) plus the minimum heartbeat spacing "
            f"({spacing:g}s): at least {interval + spacing:g}s"
        )


def _same_port(a: str, b: str) -> bool:
    """Whether two valid HOST:PORT listen addresses would bind the same port (0: any free)."""
    (host_a, _, port_a), (host_b, _, port_b) = a.rpartition(":"), b.rpartition(":")
    if int(port_a) == 0 or int(port_a) != int(port_b):
        return False
    wildcard = ("0.0.0.0", "::", "[::]", "")
    return host_a.lower() == host_b.lower() or host_a in wildcard or host_b in wildcard


def _listen_address(key: str, value: str) -> None:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{key}: {value!r} is not HOST:PORT with a port from 0 to 65535")
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if not DNS_SUBDOMAIN.fullmatch(host.lower()):
            raise ConfigError(f"{key}: {host!r} is neither an IP address nor a host name") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (the second would
    silently win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def from_mapping(raw: Any, source: str = "configuration") -> Config:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: must be a mapping of settings")
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        name = _camel_to_snake(str(key))
        if name in _SECTIONS:
            kwargs[name] = _section(_SECTIONS[name], value, f"{source}: {key}")
        elif name == "node_name":
            kwargs[name] = _coerce(f"{source}: {key}", value, None, "str | None")
        elif name in ("run_controllers", "run_node_agent", "node_conditions"):
            kwargs[name] = _coerce(f"{source}: {key}", value, True, "bool")
        else:
            known = ", ".join(
                [
                    "nodeName",
                    "runControllers",
                    "runNodeAgent",
                    "nodeConditions",
                    *map(_snake_to_camel, _SECTIONS),
                ]
            )
            raise ConfigError(f"{source}: {key}: unknown setting (known: {known})")
    cfg = Config(**kwargs)
    try:
        validate_config(cfg)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from e
    return cfg


def load(path: Path | None, env: Mapping[str, str] | None = None) -> Config:
    """Read the file (if any), then apply the environment (NODE_NAME, KUBECONFIG)."""
    env = os.environ if env is None else env
    raw: Any = {}
    source = "configuration"
    if path is not None:
        source = str(path)
        try:
            raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader) or {}
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path}: not a text file ({e.reason} at byte {e.start})") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from e
        except RecursionError as e:
            raise ConfigError(f"{path}: nested too deeply to be a configuration") from e
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from e
    cfg = from_mapping(raw, source)
    if cfg.node_name is None and env.get("NODE_NAME"):
        cfg = dataclasses.replace(cfg, node_name=env["NODE_NAME"])
    if cfg.kube.kubeconfig is None and env.get("KUBECONFIG"):
        cfg = dataclasses.replace(
            cfg, kube=dataclasses.replace(cfg.kube, kubeconfig=env["KUBECONFIG"])
        )
    return cfg
