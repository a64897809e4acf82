"""When a .deb agent renews its token and what it asks for (nodeagent.model.token_renewal)."""

from __future__ import annotations

from typing import Any

import pytest

from nodeagent.model.token_renewal import (
    InvalidToken,
    TokenClaims,
    issued_token,
    read_claims,
    retry_delay,
    seconds_until_renewal,
    token_request_spec,
    unrenewable,
)
from tests.tokens import sa_token

T0 = 1_800_000_000.0


def test_claims_of_a_node_bound_token() -> None:
    claims = read_claims(sa_token(T0, T0 + 3600) + "\n")  # `kubectl create token > f` adds one
    assert claims == TokenClaims(T0, T0 + 3600, "nodeagent-system", "nodeagent", "node-1", None)
    assert claims.lifetime == 3600
    assert unrenewable(claims) is None


@pytest.mark.parametrize(
    "token",
    ["", "a.b", "a.!!!.c", "a." + sa_token(T0, T0).split(".")[1] + ".c", "a.bnVsbA.c"],
    ids=["empty", "two parts", "not base64", "exp not after iat", "null claims"],
)
def test_unreadable_tokens(token: str) -> None:
    with pytest.raises(InvalidToken):
        read_claims(token)


def test_only_node_bound_service_account_tokens_are_renewed() -> None:
    assert "pod" in str(unrenewable(read_claims(sa_token(T0, T0 + 600, pod="agent-x"))))
    assert "no Node" in str(unrenewable(read_claims(sa_token(T0, T0 + 600, node=None))))
    bare = read_claims(sa_token(T0, T0 + 600, namespace=""))
    assert "not a ServiceAccount token" in str(unrenewable(bare))


def test_renewal_is_due_after_the_share_of_the_life() -> None:
    claims = read_claims(sa_token(T0, T0 + 3600))
    assert seconds_until_renewal(claims, T0, 0.8) == 2880
    assert seconds_until_renewal(claims, T0 + 2000, 0.8) == 880
    assert seconds_until_renewal(claims, T0 + 2880, 0.8) == 0
    assert seconds_until_renewal(claims, T0 + 7200, 0.8) == 0  # expired: at once


def test_retries_back_off_to_the_cap() -> None:
    assert [retry_delay(n, 1.0, 300.0) for n in (1, 2, 3, 9, 10, 1000)] == [
        1.0, 2.0, 4.0, 256.0, 300.0, 300.0
    ]  # fmt: skip


def test_the_next_token_is_asked_for_the_same_node() -> None:
    claims = read_claims(sa_token(T0, T0 + 3600))
    assert token_request_spec(claims, 3600) == {
        "expirationSeconds": 3600,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    with pytest.raises(InvalidToken):
        token_request_spec(read_claims(sa_token(T0, T0 + 3600, node=None)), 3600)


def test_an_issued_token_must_be_what_was_asked_for() -> None:
    current = read_claims(sa_token(T0, T0 + 3600))
    good = sa_token(T0 + 2880, T0 + 6480)
    assert issued_token({"status": {"token": good}}, current, T0 + 2880) == good
    for wrong in (
        sa_token(T0, T0 + 3600, node="node-2"),
        sa_token(T0, T0 + 3600, pod="p"),
        sa_token(T0, T0 + 3600, account="other"),
        sa_token(T0 - 7200, T0 - 3600),  # expired
    ):
        with pytest.raises(InvalidToken):
            issued_token({"status": {"token": wrong}}, current, T0)
    empty: list[dict[str, Any]] = [{}, {"status": {}}, {"status": {"token": ""}}]
    for response in empty:
        with pytest.raises(InvalidToken):
            issued_token(response, current, T0)
