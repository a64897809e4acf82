"""The eviction settings (`nodeagent.model.interceptors.settings`) read from the configuration's
`eviction` section, shared by packages that are independent of each other."""

from __future__ import annotations

from datetime import timedelta

from nodeagent.config.schema import AnnotateInterceptor, EvictionConfig
from nodeagent.model.interceptors.settings import AnnotateRule, EvictionSettings
from nodeagent.model.interceptors.targets import SelectorInterceptor, validate_interceptor_name
from nodeagent.model.selectors import SelectorError, label_selector_from_dict, validate_label_key

__all__ = ["eviction_settings"]


def eviction_settings(cfg: EvictionConfig) -> EvictionSettings:
    """Raises ValueError naming the bad `eviction.annotateInterceptors` entry."""
    rules = tuple(
        _rule(item, f"eviction.annotateInterceptors[{i}]")
        for i, item in enumerate(cfg.annotate_interceptors)
    )
    names = [r.name for r in rules]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"eviction.annotateInterceptors[{i}].name: {name} is repeated")
    return EvictionSettings(
        heartbeat_deadline=timedelta(seconds=cfg.heartbeat_deadline),
        backoff_base=cfg.backoff_base,
        backoff_cap=cfg.backoff_cap,
        annotate=rules,
    )


def _rule(item: AnnotateInterceptor, where: str) -> AnnotateRule:
    if (why := validate_interceptor_name(item.name)) is not None:
        raise ValueError(f"{where}.name: {item.name!r} {why}")
    try:
        selector = label_selector_from_dict(item.pod_selector)
    except SelectorError as exc:
        raise ValueError(f"{where}.podSelector: {exc}") from None
    if (why := validate_label_key(item.annotation_key)) is not None:
        raise ValueError(f"{where}.annotationKey: {item.annotation_key!r} {why}")
    return AnnotateRule(
        SelectorInterceptor(item.name, selector), item.annotation_key, item.annotation_value
    )
