"""nodeMaintenance.rebootWindows, windowEnd and gates: defaults off, every key read, one-line
errors naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from nodeagent.config import ConfigError, from_mapping

WINDOW = {"days": ["Sat", "Sun"], "start": "22:00", "end": "04:00", "timeZone": "Europe/Berlin"}


def test_defaults_hold_nothing() -> None:
    nm = from_mapping({}).node_maintenance
    assert nm.reboot_windows == () and nm.schedule.always
    assert nm.window_end == "Finish"
    assert not nm.gates.configured and nm.gates.prometheus.url is None
    assert not nm.limited


def test_every_key_is_read() -> None:
    nm = from_mapping(
        {
            "nodeMaintenance": {
                "rebootWindows": [WINDOW],
                "windowEnd": "Stop",
                "gates": {
                    "prometheus": {
                        "url": "http://prometheus.monitoring:9090",
                        "alertFilter": "^(Watchdog|InfoInhibitor)$",
                        "alertFilterMatchOnly": True,
                        "firingOnly": True,
                        "interval": 20,
                        "timeout": 5,
                    },
                    "podsReady": [
                        {"namespace": "db", "selector": {"matchLabels": {"app": "etcd"}}}
                    ],
                },
            }
        }
    ).node_maintenance
    assert str(nm.schedule.windows[0]) == "Sat,Sun 22:00-04:00 Europe/Berlin"
    assert nm.window_end == "Stop"
    p = nm.gates.prometheus
    assert (p.url, p.alert_filter, p.alert_filter_match_only, p.firing_only) == (
        "http://prometheus.monitoring:9090",
        "^(Watchdog|InfoInhibitor)$",
        True,
        True,
    )
    assert (p.interval, p.timeout) == (20.0, 5.0)
    assert nm.gates.pods_ready == (
        {"namespace": "db", "selector": {"matchLabels": {"app": "etcd"}}},
    )
    assert nm.limited  # windows and gates take every drain into account


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ({"windowEnd": "Later"}, "nodeMaintenance.windowEnd: must be one of Finish, Stop"),
        ({"rebootWindows": {"days": ["Mon"]}}, "nodeMaintenance.rebootWindows: must be a list"),
        (
            {"rebootWindows": [{**WINDOW, "start": "7:00"}]},
            "nodeMaintenance.rebootWindows[0].start: must be a time of day as HH:MM",
        ),
        (
            {"rebootWindows": [{**WINDOW, "timeZone": "Europe/Atlantis"}]},
            "nodeMaintenance.rebootWindows[0].timeZone: unknown time zone",
        ),
        ({"gates": {"other": {}}}, "nodeMaintenance.gates.other: unknown setting"),
        (
            {"gates": {"prometheus": {"url": "prometheus:9090"}}},
            "nodeMaintenance.gates.prometheus.url: must be an http(s) URL",
        ),
        (
            {"gates": {"prometheus": {"url": "http://p:9090", "alertFilter": "(Watchdog"}}},
            "nodeMaintenance.gates.prometheus.alertFilter: not a regular expression",
        ),
        (
            {"gates": {"prometheus": {"timeout": 0}}},
            "nodeMaintenance.gates.prometheus.timeout: must be positive",
        ),
        (
            {"gates": {"prometheus": {"interval": 5, "timeout": 10}}},
            "nodeMaintenance.gates.prometheus.interval: must be at least timeout (10s)",
        ),
        ({"gates": {"podsReady": {"namespace": "db"}}}, "nodeMaintenance.gates.podsReady: must"),
        (
            {"gates": {"podsReady": [{"namespace": "db"}]}},
            "nodeMaintenance.gates.podsReady[0].selector: required",
        ),
        (
            {"gates": {"podsReady": [{"namespace": "DB", "selector": {}}]}},
            "nodeMaintenance.gates.podsReady[0].namespace: must be a namespace name",
        ),
        (
            {"gates": {"podsReady": [{"namespace": "db", "selector": {"matchLabels": "x"}}]}},
            "nodeMaintenance.gates.podsReady[0].selector: ",
        ),
        (
            {"gates": {"podsReady": [{"namespace": "db", "selector": {}, "x": 1}]}},
            "nodeMaintenance.gates.podsReady[0].x: unknown setting",
        ),
    ],
)
def test_errors_are_one_line_naming_the_key(section: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_mapping({"nodeMaintenance": section}, "config.yaml")
    assert str(e.value).startswith(f"config.yaml: {error}"), str(e.value)
    assert "\n" not in str(e.value)
