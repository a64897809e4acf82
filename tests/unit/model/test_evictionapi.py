"""`eviction.lifecycleController`: who runs lifecycle.k8s.io's controllers, never both."""

from __future__ import annotations

import pytest

from nodeagent.config.parsing import from_mapping
from nodeagent.config.schema import ConfigError
from nodeagent.model.evictionapi import runs_lifecycle_controllers


@pytest.mark.parametrize(
    ("setting", "account", "ours"),
    [
        ("auto", False, True),  # v1.37: nobody else runs it
        ("auto", True, False),  # kube-controller-manager made its account
        ("nodeagent", True, True),  # told so: the account is not looked at
        ("kubernetes", False, False),
    ],
)
def test_who_runs_the_controllers(setting: str, account: bool, ours: bool) -> None:
    assert runs_lifecycle_controllers(setting, account) is ours


def test_the_setting_is_checked_and_named() -> None:
    assert from_mapping({}).eviction.lifecycle_controller == "auto"
    with pytest.raises(ConfigError, match=r"eviction\.lifecycleController: must be one of"):
        from_mapping({"eviction": {"lifecycleController": "both"}})
