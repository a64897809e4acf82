"""Agent configuration: frozen dataclasses, a YAML loader, validation with clear errors.

The file is YAML with one section per concern (all optional); unknown keys are errors, so a
typo never silently falls back to a default. Durations are seconds (int or float).

Modules: `schema` (the sections and their defaults; ConfigError), `parsing` (a mapping to a
Config, value by value), `checks` (rules across settings, protocol bounds), `loading` (the
file and the environment). The names below are the package's public ones.
"""

from nodeagent.config.loading import load
from nodeagent.config.parsing import from_mapping
from nodeagent.config.schema import (
    AnnotateInterceptor,
    BridgeConfig,
    Config,
    ConfigError,
    EvictionConfig,
    FinalPhaseConfig,
    KubeConfig,
    LeaderConfig,
    NodeMaintenanceConfig,
    NotificationsConfig,
    ObservabilityConfig,
    RebootConfig,
    ShutdownConfig,
    StaticPodConfig,
    Webhook,
)

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
    "from_mapping",
    "load",
]
