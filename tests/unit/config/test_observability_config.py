"""observability.probeListen and observability.idleTimeout: defaults, and one-line errors
naming the setting."""

from __future__ import annotations

from typing import Any

import pytest

from nodeagent.config import ConfigError, ObservabilityConfig, from_mapping


def test_defaults_have_no_probe_listener_and_a_short_idle_timeout() -> None:
    cfg = from_mapping({}).observability
    assert cfg == ObservabilityConfig()
    assert cfg.probe_listen is None
    assert 0 < cfg.idle_timeout <= 5


def test_both_settings_are_read() -> None:
    cfg = from_mapping(
        {"observability": {"probeListen": "0.0.0.0:9874", "idleTimeout": 1.5}}
    ).observability
    assert (cfg.probe_listen, cfg.idle_timeout) == ("0.0.0.0:9874", 1.5)
    assert from_mapping({"observability": {"probeListen": None}}).observability.probe_listen is None


@pytest.mark.parametrize(
    ("observability", "message"),
    [
        ({"probeListen": "9874"}, "observability.probeListen: '9874' is not HOST:PORT"),
        ({"probeListen": "[::1]:70000"}, "observability.probeListen: '[::1]:70000' is not"),
        ({"probeListen": "no_such host:1"}, "observability.probeListen: 'no_such host' is neither"),
        ({"probeListen": 9874}, "observability.probeListen: must be a string"),
        ({"idleTimeout": 0}, "observability.idleTimeout: must be positive and at most 60"),
        ({"idleTimeout": 61}, "observability.idleTimeout: must be positive and at most 60"),
        ({"idleTimeout": "3s"}, "observability.idleTimeout: must be a number of seconds"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_setting(
    observability: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        from_mapping({"observability": observability})
    text = str(info.value)
    assert message in text and "\n" not in text
