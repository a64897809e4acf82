"""What the EvictionRequest controller, the cluster-side interceptors and the eviction bridge
take from config (shared by packages that are independent of each other)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from nodeagent.config.schema import AnnotateInterceptor, EvictionConfig
from nodeagent.model.interceptors.heartbeats import (
    DEFAULT_HEARTBEAT_DEADLINE,
    MIN_HEARTBEAT_INTERVAL,
)
from nodeagent.model.interceptors.imperative import EVICTION_BACKOFF_BASE, EVICTION_BACKOFF_CAP
from nodeagent.model.interceptors.targets import SelectorInterceptor, validate_interceptor_name
from nodeagent.model.selectors import SelectorError, label_selector_from_dict, validate_label_key

__all__ = ["AnnotateRule", "EvictionSettings"]


@dataclass(frozen=True)
class AnnotateRule:
    """One annotate-and-wait interceptor (the Eviction Reschedule Hook pattern)."""

    interceptor: SelectorInterceptor
    annotation_key: str
    annotation_value: str

    @property
    def name(self) -> str:
        return self.interceptor.name


@dataclass(frozen=True)
class EvictionSettings:
    heartbeat_deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE
    # the CRD refuses heartbeats closer than 60 s; only tests (with a CRD to match) go below
    heartbeat_min_interval: timedelta = MIN_HEARTBEAT_INTERVAL
    backoff_base: float = EVICTION_BACKOFF_BASE
    backoff_cap: float = EVICTION_BACKOFF_CAP
    annotate: tuple[AnnotateRule, ...] = ()

    @property
    def configured(self) -> tuple[SelectorInterceptor, ...]:
        """The configured interceptors that are defaults for the pods they select."""
        return tuple(rule.interceptor for rule in self.annotate)

    @classmethod
    def from_config(cls, cfg: EvictionConfig) -> EvictionSettings:
        """Raises ValueError naming the bad `eviction.annotateInterceptors` entry."""
        rules = tuple(
            _rule(item, f"eviction.annotateInterceptors[{i}]")
            for i, item in enumerate(cfg.annotate_interceptors)
        )
        names = [r.name for r in rules]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"eviction.annotateInterceptors[{i}].name: {name} is repeated")
        return cls(
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
