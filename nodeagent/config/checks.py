"""The rules across settings of a parsed `Config`, and the bounds the protocols it speaks set
(leader election, token lifetimes, heartbeats, listen addresses). Each error is one line that
names the setting."""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta

from nodeagent.config.schema import (
    Config,
    ConfigError,
    EvictionConfig,
    FinalPhaseConfig,
    KubeConfig,
    LeaderConfig,
    NodeMaintenanceConfig,
    ObservabilityConfig,
    RebootConfig,
    ShutdownConfig,
)
from nodeagent.model.evictionapi import EVICTION_APIS, LIFECYCLE_CONTROLLERS
from nodeagent.model.interceptors.heartbeats import MIN_HEARTBEAT_INTERVAL, heartbeat_interval
from nodeagent.model.leader import JITTER
from nodeagent.model.maintenance import ESCALATIONS
from nodeagent.model.selectors import DNS_SUBDOMAIN, DNS_SUBDOMAIN_MAX, validate_label_key
from nodeagent.model.token_renewal import MAX_EXPIRATION, MIN_EXPIRATION

__all__ = [
    "DNS_LABEL",
    "LOG_LEVELS",
    "MAX_CONCURRENT_REQUESTS",
    "MAX_HEARTBEAT_DEADLINE",
    "MAX_IDLE_TIMEOUT",
    "validate_config",
]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_CONCURRENT_REQUESTS = 256
# a longer wait for a request lets idle connections hold the health port's slots longer
MAX_IDLE_TIMEOUT = 60
# beyond this a deadline is none (and far beyond it, times past it no longer fit a datetime)
MAX_HEARTBEAT_DEADLINE = 7 * 24 * 3600
# a namespace's name (RFC 1123 label)
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")


def validate_config(cfg: Config) -> None:
    """Cross-field rules; raises ConfigError naming the field."""
    _check_shutdown(cfg.shutdown)
    _check_reboot(cfg.reboot)
    if cfg.reboot.enabled and not cfg.run_node_agent:
        raise ConfigError("reboot.enabled: true needs runNodeAgent: true (the node reboots itself)")
    _check_leader(cfg.leader)
    _check_kube(cfg.kube)
    _check_node_maintenance(cfg.node_maintenance)
    _check_eviction(cfg.eviction)
    _check_observability(cfg.observability)
    _check_bridge(cfg)
    if (
        cfg.run_node_agent
        and cfg.run_controllers
        and cfg.shutdown.enabled
        and cfg.shutdown.budget > cfg.node_maintenance.max_shutdown
    ):
        raise ConfigError(
            f"shutdown.budget ({cfg.shutdown.budget:g}s) exceeds nodeMaintenance.maxShutdown "
            f"({cfg.node_maintenance.max_shutdown:g}s): the controllers would stop counting "
            "the node's shutdown maintenance before its shutdown ends"
        )
    if not cfg.run_node_agent and not cfg.run_controllers:
        raise ConfigError("runNodeAgent: false with runControllers: false leaves nothing to run")
    if cfg.node_name is not None and not DNS_SUBDOMAIN.fullmatch(cfg.node_name):
        raise ConfigError(f"nodeName: {cfg.node_name!r} is not a valid node name")


def _check_shutdown(s: ShutdownConfig) -> None:
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


MIN_CHECK_INTERVAL = 1.0


def _check_reboot(r: RebootConfig) -> None:
    for key, path in (("sentinel", r.sentinel), ("requestFile", r.request_file)):
        if path is None:
            continue
        if not path.is_absolute() or path.name in ("", ".", ".."):
            raise ConfigError(f"reboot.{key}: must be an absolute path of a file, got {path}")
    if r.sentinel == r.request_file:
        raise ConfigError(
            f"reboot.requestFile: must not be reboot.sentinel ({r.sentinel}): "
            "`nodeagent reboot --cancel` would remove the sentinel"
        )
    if r.check_interval < MIN_CHECK_INTERVAL:
        raise ConfigError(
            f"reboot.checkInterval: must be at least {MIN_CHECK_INTERVAL:g} seconds, "
            f"got {r.check_interval:g}"
        )
    if r.command_timeout <= 0:
        raise ConfigError(f"reboot.commandTimeout: must be positive, got {r.command_timeout:g}")


def _check_leader(ld: LeaderConfig) -> None:
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


def _check_kube(k: KubeConfig) -> None:
    if not 1 <= k.max_concurrent_requests <= MAX_CONCURRENT_REQUESTS:
        raise ConfigError(
            f"kube.maxConcurrentRequests: must be from 1 to {MAX_CONCURRENT_REQUESTS}"
        )
    if k.request_timeout <= 0:
        raise ConfigError("kube.requestTimeout: must be positive")
    if not 0 < k.token_renew_after < 1:
        raise ConfigError("kube.tokenRenewAfter: must be a share of the token's life (0 to 1)")
    if not MIN_EXPIRATION <= k.token_expiration <= MAX_EXPIRATION:
        raise ConfigError(
            f"kube.tokenExpiration: must be from {MIN_EXPIRATION} to {MAX_EXPIRATION} seconds"
        )
    left = (1 - k.token_renew_after) * k.token_expiration
    if left <= k.request_timeout:
        raise ConfigError(
            f"kube.tokenRenewAfter ({k.token_renew_after:g}) leaves {left:g}s of a "
            f"kube.tokenExpiration ({k.token_expiration}s) token's life to renew it in, "
            f"not more than kube.requestTimeout ({k.request_timeout:g}s): one hung "
            "request outlives the token"
        )


def _check_node_maintenance(nm: NodeMaintenanceConfig) -> None:
    deadline = nm.drain_deadline
    if deadline is not None and deadline <= 0:
        raise ConfigError("nodeMaintenance.drainDeadline: must be positive")
    if nm.drain_deadline_escalation not in ESCALATIONS:
        raise ConfigError(
            "nodeMaintenance.drainDeadlineEscalation: must be one of " + ", ".join(ESCALATIONS)
        )
    per_zone = nm.max_draining_nodes_per_zone
    if per_zone is not None and (isinstance(per_zone, bool) or per_zone < 1):
        raise ConfigError("nodeMaintenance.maxDrainingNodesPerZone: must be at least 1")
    if (why := validate_label_key(nm.zone_label)) is not None:
        raise ConfigError(f"nodeMaintenance.zoneLabel: {why}")
    if not 0 < nm.max_shutdown < MAX_HEARTBEAT_DEADLINE:
        raise ConfigError(
            f"nodeMaintenance.maxShutdown: must be from 0 to {MAX_HEARTBEAT_DEADLINE} seconds"
        )


BRIDGE_CERTIFICATES = ("managed", "provided")


def _check_eviction(ev: EvictionConfig) -> None:
    if ev.api not in EVICTION_APIS:
        raise ConfigError(
            f"eviction.api: must be one of {', '.join(EVICTION_APIS)}, got {ev.api!r}"
        )
    if ev.lifecycle_controller not in LIFECYCLE_CONTROLLERS:
        raise ConfigError(
            f"eviction.lifecycleController: must be one of {', '.join(LIFECYCLE_CONTROLLERS)}, "
            f"got {ev.lifecycle_controller!r}"
        )
    _check_heartbeat_deadline(ev.heartbeat_deadline)
    if not 0 < ev.backoff_base <= ev.backoff_cap:
        raise ConfigError(
            f"eviction.backoffBase ({ev.backoff_base:g}s) must be positive and at most "
            f"eviction.backoffCap ({ev.backoff_cap:g}s)"
        )


def _check_bridge(cfg: Config) -> None:
    bridge = cfg.eviction.bridge
    if not 1 <= bridge.port <= 65535:
        raise ConfigError(f"eviction.bridge.port: must be from 1 to 65535, got {bridge.port}")
    name = bridge.webhook_configuration
    if name is not None and not (len(name) <= DNS_SUBDOMAIN_MAX and DNS_SUBDOMAIN.fullmatch(name)):
        raise ConfigError(
            f"eviction.bridge.webhookConfiguration: {name!r} is not a valid object name"
        )
    if bridge.certificates not in BRIDGE_CERTIFICATES:
        raise ConfigError(
            f"eviction.bridge.certificates: must be one of {', '.join(BRIDGE_CERTIFICATES)}, "
            f"got {bridge.certificates!r}"
        )
    if bridge.asked_again_within <= 0:
        raise ConfigError(
            f"eviction.bridge.askedAgainWithin: must be positive, got {bridge.asked_again_within:g}"
        )
    if bridge.client_ca_file is not None and not bridge.client_ca_file.is_absolute():
        raise ConfigError(
            f"eviction.bridge.clientCaFile: must be an absolute path, got {bridge.client_ca_file}"
        )
    if not bridge.enabled:
        return
    if not cfg.run_controllers:
        # the bridge waits for the interceptors the controllers run
        raise ConfigError("eviction.bridge.enabled: true needs runControllers: true")
    o = cfg.observability
    for key, listen in (("listen", o.listen), ("probeListen", o.probe_listen)):
        if listen is not None and _same_port(listen, f"0.0.0.0:{bridge.port}"):
            raise ConfigError(
                f"eviction.bridge.port ({bridge.port}) must not take the port of "
                f"observability.{key} ({listen})"
            )


def _check_observability(o: ObservabilityConfig) -> None:
    if o.log_format not in ("text", "json"):
        raise ConfigError("observability.logFormat: must be text or json")
    if o.log_level.upper() not in LOG_LEVELS:
        raise ConfigError(
            f"observability.logLevel: {o.log_level!r} is not one of {', '.join(LOG_LEVELS)}"
        )
    _listen_address("observability.listen", o.listen)
    if o.probe_listen is not None:
        _listen_address("observability.probeListen", o.probe_listen)
        if _same_port(o.listen, o.probe_listen):
            raise ConfigError(
                f"observability.probeListen ({o.probe_listen}) must not take "
                f"the port of observability.listen ({o.listen})"
            )
    if not 0 < o.idle_timeout <= MAX_IDLE_TIMEOUT:
        raise ConfigError(
            f"observability.idleTimeout: must be positive and at most {MAX_IDLE_TIMEOUT} seconds"
        )


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
