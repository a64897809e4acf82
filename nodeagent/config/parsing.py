"""From a mapping (the YAML file's) to a `Config`: each key known, each value of its setting's
type, lists (interceptors, webhooks, the drain plan) checked entry by entry; then the rules
across settings (`nodeagent.config.checks`)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from nodeagent.config.checks import validate_config
from nodeagent.config.schema import (
    AnnotateInterceptor,
    Config,
    ConfigError,
    EvictionConfig,
    FinalPhaseConfig,
    KubeConfig,
    LeaderConfig,
    NodeMaintenanceConfig,
    NotificationsConfig,
    ObservabilityConfig,
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

__all__ = ["MAX_ATTEMPTS", "MAX_WEBHOOKS", "from_mapping"]

T = TypeVar("T")
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
