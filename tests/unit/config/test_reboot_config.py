"""reboot: off by default (an agent that reboots its node must be opted into), every setting
read, one-line errors naming the setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodeagent.config import ConfigError, RebootConfig, from_mapping


def test_off_by_default_with_the_debian_sentinel() -> None:
    cfg = from_mapping({}).reboot
    assert cfg == RebootConfig()
    assert not cfg.enabled
    assert cfg.sentinel == Path("/var/run/reboot-required")
    assert cfg.sentinel_command is None
    assert cfg.request_file == Path("/run/nodeagent/reboot-requested")


def test_every_setting_read() -> None:
    cfg = from_mapping(
        {
            "reboot": {
                "enabled": True,
                "sentinel": None,
                "sentinelCommand": "/usr/bin/needs-restarting -r --quiet 'a b'",
                "checkInterval": 300,
                "commandTimeout": 20,
                "requestFile": "/run/nodeagent/asked",
            }
        }
    ).reboot
    assert cfg == RebootConfig(
        enabled=True,
        sentinel=None,
        sentinel_command=("/usr/bin/needs-restarting", "-r", "--quiet", "a b"),
        check_interval=300.0,
        command_timeout=20.0,
        request_file=Path("/run/nodeagent/asked"),
    )
    listed = from_mapping({"reboot": {"sentinelCommand": ["sh", "-c", "test -e /x"]}}).reboot
    assert listed.sentinel_command == ("sh", "-c", "test -e /x")
    assert from_mapping({"reboot": {"sentinelCommand": ""}}).reboot.sentinel_command is None


@pytest.mark.parametrize(
    ("reboot", "message"),
    [
        ({"sentinel": "reboot-required"}, "reboot.sentinel: must be an absolute path"),
        ({"requestFile": "/"}, "reboot.requestFile: must be an absolute path of a file"),
        ({"requestFile": "/var/run/reboot-required"}, "reboot.requestFile: must not be"),
        ({"sentinelCommand": "sh -c 'exit 0"}, "reboot.sentinelCommand: cannot split"),
        ({"sentinelCommand": "   "}, "reboot.sentinelCommand: names no command"),
        ({"sentinelCommand": []}, "reboot.sentinelCommand: must be a command line"),
        ({"sentinelCommand": [""]}, "reboot.sentinelCommand: must be a command line"),
        ({"sentinelCommand": 3}, "reboot.sentinelCommand: must be a command line"),
        ({"checkInterval": 0.5}, "reboot.checkInterval: must be at least 1"),
        ({"commandTimeout": 0}, "reboot.commandTimeout: must be positive"),
        ({"enabled": "yes"}, "reboot.enabled: must be true or false"),
        ({"sentinal": "/x"}, "reboot.sentinal: unknown setting"),
    ],
)
def test_errors_are_one_line_naming_the_setting(reboot: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_mapping({"reboot": reboot})
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_enabled_needs_the_node_agent() -> None:
    with pytest.raises(ConfigError, match=r"reboot.enabled: true needs runNodeAgent: true"):
        from_mapping({"runNodeAgent": False, "reboot": {"enabled": True}})
