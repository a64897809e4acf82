"""eviction.bridge: off by default, every setting read, one-line errors naming the setting;
and the bridge it builds (its users, its place, its port)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodeagent.bridge.certs import renew
from nodeagent.bridge.server import bridge_from_config
from nodeagent.config import BridgeConfig, ConfigError, from_mapping
from nodeagent.model.times import utcnow


def test_off_by_default_and_every_setting_read() -> None:
    assert from_mapping({}).eviction.bridge == BridgeConfig()
    assert not BridgeConfig().enabled
    bridge = from_mapping(
        {
            "eviction": {
                "bridge": {
                    "enabled": True,
                    "port": 9443,
                    "daemonSetPods": True,
                    "staticPods": True,
                    "ownUsers": ["system:serviceaccount:kube-system:kured"],
                    "webhookConfiguration": None,
                    "certificates": "provided",
                }
            }
        }
    ).eviction.bridge
    assert bridge == BridgeConfig(
        enabled=True,
        port=9443,
        daemon_set_pods=True,
        static_pods=True,
        own_users=("system:serviceaccount:kube-system:kured",),
        webhook_configuration=None,
        certificates="provided",
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"eviction": {"bridge": {"port": 0}}}, "eviction.bridge.port: must be from 1 to 65535"),
        ({"eviction": {"bridge": {"port": 70000}}}, "eviction.bridge.port: must be from 1"),
        ({"eviction": {"bridge": {"port": "8443"}}}, "eviction.bridge.port: must be an integer"),
        ({"eviction": {"bridge": {"enabled": "yes"}}}, "eviction.bridge.enabled: must be true"),
        (
            {"eviction": {"bridge": {"askedAgainWithin": 0}}},
            "eviction.bridge.askedAgainWithin: must be positive, got 0",
        ),
        ({"eviction": {"bridge": {"askedAgainWithin": "1m"}}}, "askedAgainWithin: must be a"),
        ({"eviction": {"bridge": {"ownUsers": "me"}}}, "eviction.bridge.ownUsers: must be a list"),
        ({"eviction": {"bridge": {"ownUsers": [""]}}}, "eviction.bridge.ownUsers: must be a list"),
        ({"eviction": {"bridge": {"webhookConfiguration": "A_B"}}}, "webhookConfiguration: 'A_B'"),
        ({"eviction": {"bridge": {"certManager": True}}}, "eviction.bridge.certManager: unknown"),
        (
            {"eviction": {"bridge": {"certificates": "cert-manager"}}},
            "eviction.bridge.certificates: must be one of managed, provided, got 'cert-manager'",
        ),
        ({"eviction": {"bridge": []}}, "eviction.bridge: must be a mapping"),
        (
            {"runControllers": False, "eviction": {"bridge": {"enabled": True}}},
            "eviction.bridge.enabled: true needs runControllers: true",
        ),
        (
            {
                "observability": {"listen": "0.0.0.0:8443"},
                "eviction": {"bridge": {"enabled": True}},
            },
            "eviction.bridge.port (8443) must not take the port of observability.listen",
        ),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_setting(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping(config, "config.yaml")
    text = str(caught.value)
    assert "\n" not in text and text.startswith("config.yaml: ")
    assert message in text, text


def test_the_bridge_passes_the_controllers_own_evictions_and_keeps_its_ca_where_told() -> None:
    cfg = from_mapping(
        {
            "leader": {"namespace": "ops"},
            "eviction": {"bridge": {"enabled": True, "port": 9443, "ownUsers": ["kured"]}},
        }
    )
    server = bridge_from_config(_NoClient(), cfg)  # type: ignore[arg-type]
    assert server.bridge.settings.own_users == {
        "system:serviceaccount:ops:nodeagent-controllers",
        "kured",
    }
    assert server.keeper.place.namespace == "ops"
    assert server.keeper.place.webhook_configuration == "nodeagent-eviction-bridge"
    assert server.listen.port == 9443
    injected = from_mapping({"eviction": {"bridge": {"webhookConfiguration": None}}})
    assert bridge_from_config(_NoClient(), injected).keeper.place.webhook_configuration is None  # type: ignore[arg-type]
    assert not server.keeper.place.provided
    provided = from_mapping({"eviction": {"bridge": {"certificates": "provided"}}})
    assert bridge_from_config(_NoClient(), provided).keeper.place.provided  # type: ignore[arg-type]


class _NoClient:
    """Building the bridge asks the API server nothing."""


def test_a_client_ca_file_is_read_checked_and_required_of_clients(tmp_path: Path) -> None:
    assert from_mapping({}).eviction.bridge.client_ca_file is None
    with pytest.raises(ConfigError) as caught:
        from_mapping({"eviction": {"bridge": {"clientCaFile": "ca.crt"}}}, "config.yaml")
    assert "eviction.bridge.clientCaFile: must be an absolute path" in str(caught.value)
    missing = tmp_path / "missing.crt"
    for content, why in ((None, "No such file"), (b"", "the file is empty"), (b"x", "not a PEM")):
        if content is not None:
            missing.write_bytes(content)
        cfg = from_mapping({"eviction": {"bridge": {"clientCaFile": str(missing)}}})
        with pytest.raises(ValueError) as bad:
            bridge_from_config(_NoClient(), cfg)  # type: ignore[arg-type]
        text = str(bad.value)
        assert text.startswith(f"eviction.bridge.clientCaFile: {missing}: ") and why in text
        assert "\n" not in text
    ca = tmp_path / "ca.crt"
    ca.write_bytes(renew(None, ["kube-apiserver"], utcnow(), "ca").ca)
    cfg = from_mapping({"eviction": {"bridge": {"clientCaFile": str(ca)}}})
    assert bridge_from_config(_NoClient(), cfg) is not None  # type: ignore[arg-type]
