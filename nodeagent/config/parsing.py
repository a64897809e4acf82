"""From a mapping (the YAML file's) to a `Config`: each key known, each value of its setting's
type, lists (interceptors, webhooks, the drain plan) checked entry by entry; then the rules
across settings (`nodeagent.config.checks`)."""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
from collections.abc import Callable, Mapping, Set
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from nodeagent.config.checks import validate_config
from nodeagent.config.schema import (
    AnnotateInterceptor,
    BridgeConfig,
    Config,
    ConfigError,
    EvictionConfig,
    FinalPhaseConfig,
    GatesConfig,
    KubeConfig,
    LeaderConfig,
    NodeMaintenanceConfig,
    NotificationsConfig,
    ObservabilityConfig,
    PrometheusGateConfig,
    RebootConfig,
    ShutdownConfig,
    StaticPodConfig,
    Webhook,
)
from nodeagent.model import notifications as notif
from nodeagent.model.drainplan import InvalidPlan, effective_plan
from nodeagent.model.drainslots import DrainLimit, InvalidLimit
from nodeagent.model.interceptors.targets import validate_interceptor_name
from nodeagent.model.selectors import (
    DNS_SUBDOMAIN,
    SelectorError,
    label_selector_from_dict,
    validate_label_key,
)
from nodeagent.model.windows import WINDOW_ENDS, InvalidWindow, parse_windows

__all__ = ["MAX_ATTEMPTS", "MAX_WEBHOOKS", "from_mapping"]

T = TypeVar("T")
_SECTIONS: dict[str, type[Any]] = {
    "kube": KubeConfig,
    "shutdown": ShutdownConfig,
    "reboot": RebootConfig,
    "leader": LeaderConfig,
    "eviction": EvictionConfig,
    "node_maintenance": NodeMaintenanceConfig,
    "static_pods": StaticPodConfig,
    "observability": ObservabilityConfig,
    "notifications": NotificationsConfig,
}
_SUBSECTIONS: dict[str, type[Any]] = {
    "final_phase": FinalPhaseConfig,
    "bridge": BridgeConfig,
    "gates": GatesConfig,
    "prometheus": PrometheusGateConfig,
}
# each webhook has a worker of its own (deliveries to one go in order): this bounds them
MAX_WEBHOOKS = 16
_NAMESPACE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")  # a DNS label
MAX_ATTEMPTS = 10


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
            kwargs[name] = _coerce(f"{source}: {key}", value, "str | None")
        elif name in ("run_controllers", "run_node_agent", "node_conditions"):
            kwargs[name] = _coerce(f"{source}: {key}", value, "bool")
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


def _snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _coerce(where: str, value: Any, annotation: str) -> Any:
    """Coerce one YAML value to the type its field's annotation names: the first of
    `_COERCIONS`' keywords the annotation contains; other types pass as they are."""
    nullable = "None" in annotation
    for keyword, coerce in _COERCIONS:
        if keyword in annotation:
            return coerce(where, value, nullable)
    return value


def _as_path(where: str, value: Any, nullable: bool) -> Path | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a path, got {value!r}")
    return Path(value)


def _as_bool(where: str, value: Any, nullable: bool) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: must be true or false, got {value!r}")
    return value


def _as_seconds(where: str, value: Any, nullable: bool) -> float | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number of seconds, got {value!r}")
    return float(value)


def _as_int(where: str, value: Any, nullable: bool) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: must be an integer, got {value!r}")
    return value


def _as_str(where: str, value: Any, nullable: bool) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be a string, got {value!r}")
    return value


# In order: the first keyword an annotation contains picks its coercion. A None value is
# kept where the annotation allows it, except for bools (no setting of theirs is optional).
_COERCIONS: tuple[tuple[str, Callable[[str, Any, bool], Any]], ...] = (
    ("Path", _as_path),
    ("bool", _as_bool),
    ("float", _as_seconds),
    ("int", _as_int),
    ("str", _as_str),
)


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
        special = _SPECIAL.get(name)
        if special is not None:
            kwargs[name] = special(value, f"{where}.{key}")
            continue
        if name in _SUBSECTIONS:
            kwargs[name] = _section(_SUBSECTIONS[name], value, f"{where}.{key}")
            continue
        kwargs[name] = _coerce(f"{where}.{key}", value, str(f.type))
    out = cls(**kwargs)
    _check_section(out, where)
    return out


def _check_section(section: object, where: str) -> None:
    """The rules of one section's own settings that name no other section."""
    if isinstance(section, NodeMaintenanceConfig) and section.window_end not in WINDOW_ENDS:
        raise ConfigError(
            f"{where}.windowEnd: must be one of {', '.join(WINDOW_ENDS)}, "
            f"got {section.window_end!r}"
        )
    if isinstance(section, PrometheusGateConfig):
        _check_prometheus(section, where)


def _check_prometheus(p: PrometheusGateConfig, where: str) -> None:
    if p.url is not None:
        parsed = urlsplit(p.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigError(f"{where}.url: must be an http(s) URL, got {p.url!r}")
    if p.alert_filter is not None:
        try:
            re.compile(p.alert_filter)
        except re.error as e:
            raise ConfigError(f"{where}.alertFilter: not a regular expression: {e}") from None
    if p.timeout <= 0:
        raise ConfigError(f"{where}.timeout: must be positive")
    if p.interval < p.timeout:
        raise ConfigError(
            f"{where}.interval: must be at least timeout ({p.timeout:g}s), got "
            f"{p.interval:g}s: one read at a time"
        )


def _reboot_windows(raw: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    try:
        parse_windows(raw, where)
    except InvalidWindow as e:
        raise ConfigError(str(e)) from None
    return tuple(dict(w) for w in raw or ())


def _pods_ready(raw: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list of {{namespace, selector}}")
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{at}: must be a mapping of namespace and selector")
        for key in item:
            if key not in ("namespace", "selector"):
                raise ConfigError(f"{at}.{key}: unknown setting (known: namespace, selector)")
        namespace = item.get("namespace")
        if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
            raise ConfigError(f"{at}.namespace: must be a namespace name, got {namespace!r}")
        if "selector" not in item:
            raise ConfigError(f"{at}.selector: required")
        _check_pod_selector(item["selector"], f"{at}.selector")
    return tuple(dict(item) for item in raw)


def _special() -> dict[str, Callable[[Any, str], Any]]:
    """The settings read by a parser of their own (lists of entries, limits, commands)."""
    return {
        "annotate_interceptors": _interceptors,
        "drain_plan": _drain_plan,
        "max_draining_nodes": _drain_limit,
        "webhooks": _webhooks,
        "own_users": _strings,
        "sentinel_command": _command,
        "reboot_windows": _reboot_windows,
        "pods_ready": _pods_ready,
    }


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(v, str) and v for v in raw):
        raise ConfigError(f"{where}: must be a list of non-empty strings, got {raw!r}")
    return tuple(raw)


def _command(raw: Any, where: str) -> tuple[str, ...] | None:
    """A command: one string split as a shell would (no shell runs it), or a list of
    arguments; None (or an empty string) for none."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        try:
            words = shlex.split(raw)
        except ValueError as e:
            raise ConfigError(f"{where}: cannot split {raw!r} into arguments: {e}") from e
        if not words:
            raise ConfigError(f"{where}: names no command: {raw!r}")
        return tuple(words)
    if isinstance(raw, list) and raw and all(isinstance(w, str) for w in raw) and raw[0]:
        return tuple(raw)
    raise ConfigError(f"{where}: must be a command line or a list of arguments, got {raw!r}")


def _interceptors(raw: Any, where: str) -> tuple[AnnotateInterceptor, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list")
    out: list[AnnotateInterceptor] = []
    for i, item in enumerate(raw):
        out.append(_interceptor(item, f"{where}[{i}]", {earlier.name for earlier in out}))
    return tuple(out)


def _interceptor(item: Any, where: str, taken: Set[str]) -> AnnotateInterceptor:
    """One entry; `taken`: the names of the entries before it."""
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: must be a mapping")
    unknown = set(item) - {"name", "podSelector", "annotationKey", "annotationValue"}
    if unknown:
        raise ConfigError(f"{where}.{sorted(unknown)[0]}: unknown setting")
    for req in ("name", "podSelector", "annotationKey"):
        if req not in item:
            raise ConfigError(f"{where}.{req}: required")
    _check_interceptor_name(item["name"], f"{where}.name", taken)
    _check_pod_selector(item["podSelector"], f"{where}.podSelector")
    if (why := validate_label_key(str(item["annotationKey"]))) is not None:
        raise ConfigError(f"{where}.annotationKey: {item['annotationKey']!r} {why}")
    return AnnotateInterceptor(
        name=item["name"],
        pod_selector=dict(item["podSelector"]),
        annotation_key=str(item["annotationKey"]),
        annotation_value=str(item.get("annotationValue", "true")),
    )


def _check_interceptor_name(name: Any, where: str, taken: Set[str]) -> None:
    if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
        raise ConfigError(f"{where}: must be a DNS subdomain like mover.example.com")
    if (why := validate_interceptor_name(name)) is not None:
        raise ConfigError(f"{where}: {name!r} {why}")
    if name in taken:
        raise ConfigError(f"{where}: {name} is repeated")


def _check_pod_selector(selector: Any, where: str) -> None:
    if not isinstance(selector, Mapping):
        raise ConfigError(f"{where}: must be a label selector mapping")
    try:
        label_selector_from_dict(selector)
    except SelectorError as e:
        raise ConfigError(f"{where}: {e}") from None


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
    events = _webhook_events(item, f"{where}.events")
    template = item.get("template")
    _check_webhook_template(template, f"{where}.template")
    headers = item.get("headers") or {}
    _check_webhook_headers(headers, f"{where}.headers")
    timeout = _coerce(f"{where}.timeout", item.get("timeout", 5.0), "float")
    if timeout <= 0:
        raise ConfigError(f"{where}.timeout: must be positive")
    attempts = _coerce(f"{where}.attempts", item.get("attempts", 3), "int")
    if not 1 <= attempts <= MAX_ATTEMPTS:
        raise ConfigError(f"{where}.attempts: must be from 1 to {MAX_ATTEMPTS}")
    return Webhook(url, events, template, dict(headers), timeout, attempts)


def _webhook_events(item: Mapping[str, Any], where: str) -> frozenset[str]:
    """The events a webhook is sent: all of them unless it names some."""
    if "events" not in item:
        return frozenset(notif.EVENTS)
    raw = item["events"]
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: must be a list of one or more events")
    for event in raw:
        if event not in notif.EVENTS:
            raise ConfigError(
                f"{where}: {event!r} is not an event (known: {', '.join(notif.EVENTS)})"
            )
    return frozenset(raw)


def _check_webhook_template(template: Any, where: str) -> None:
    if template is None:
        return
    try:
        notif.check_template(template)
    except notif.InvalidSetting as e:
        # the error may start with the path inside the template (".x" or "[0]")
        raise ConfigError(f"{where}{'' if str(e)[0] in '.[' else ': '}{e}") from None


def _check_webhook_headers(headers: Any, where: str) -> None:
    if not isinstance(headers, Mapping):
        raise ConfigError(f"{where}: must be a mapping of header names to values")
    for name, value in headers.items():
        try:
            notif.check_header(name, value)
        except notif.InvalidSetting as e:
            raise ConfigError(f"{where}: {e}") from None


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


_SPECIAL = _special()
