"""The bridge waits for the annotate-and-wait interceptors the EvictionRequest controller runs,
and lets its own ServiceAccount's evictions through."""

from __future__ import annotations

from nodeagent.bridge.server import bridge_settings, service_account_user
from nodeagent.model.bridge.decision import bridged_interceptors
from nodeagent.model.interceptors.settings import AnnotateRule, EvictionSettings
from nodeagent.model.interceptors.targets import SelectorInterceptor
from nodeagent.model.selectors import label_selector_from_dict

MOVER = AnnotateRule(
    SelectorInterceptor(
        "mover.example.com", label_selector_from_dict({"matchLabels": {"app": "db"}})
    ),
    "example.com/reschedule",
    "true",
)


def test_the_bridge_waits_for_the_configured_interceptors() -> None:
    own = service_account_user("nodeagent-system", "nodeagent-controllers")
    assert own == "system:serviceaccount:nodeagent-system:nodeagent-controllers"
    settings = bridge_settings(EvictionSettings(annotate=(MOVER,)), [own])
    assert settings.own_users == {own}
    db = {"metadata": {"name": "db-0", "labels": {"app": "db"}}}
    assert bridged_interceptors(db, settings) == ("mover.example.com",)
    assert bridged_interceptors(db, bridge_settings(EvictionSettings(), [own])) == ()
