"""What the EvictionRequest controller, the cluster-side interceptors and the eviction bridge
are configured with (`nodeagent.config.eviction_settings` reads it from the configuration)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from nodeagent.model.interceptors.heartbeats import (
    DEFAULT_HEARTBEAT_DEADLINE,
    MIN_HEARTBEAT_INTERVAL,
)
from nodeagent.model.interceptors.imperative import EVICTION_BACKOFF_BASE, EVICTION_BACKOFF_CAP
from nodeagent.model.interceptors.targets import SelectorInterceptor

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
