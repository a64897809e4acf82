"""The token renewal settings of `kube` (nodeagent.config)."""

from __future__ import annotations

import pytest

from nodeagent.config import ConfigError, from_mapping


def test_defaults_and_settings() -> None:
    kube = from_mapping({}).kube
    assert (kube.token_renewal, kube.token_renew_after, kube.token_expiration) == (
        True,
        0.8,
        3600,
    )
    kube = from_mapping(
        {"kube": {"tokenRenewal": False, "tokenRenewAfter": 0.5, "tokenExpiration": 600}}
    ).kube
    assert (kube.token_renewal, kube.token_renew_after, kube.token_expiration) == (False, 0.5, 600)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"tokenRenewAfter": 0}, "kube.tokenRenewAfter"),
        ({"tokenRenewAfter": 1}, "kube.tokenRenewAfter"),
        ({"tokenExpiration": 599}, "from 600 to 86400"),
        ({"tokenExpiration": 86401}, "from 600 to 86400"),
        ({"tokenExpiration": 3600.5}, "must be an integer"),
    ],
)
def test_invalid(setting: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping({"kube": setting})
