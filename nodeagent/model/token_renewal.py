"""When a `.deb` agent renews its ServiceAccount token, and what it asks for.

A `.deb` install's kubeconfig may read its token from a file (`tokenFile`): a token of the
ServiceAccount nodeagent-system/nodeagent bound to the node's Node object, short-lived. The
agent asks the TokenRequest API for the next one (bound to the same Node) once the current one
has lived `renew_after` of its life, as the kubelet does for pods' tokens (80 %), and retries
with backoff until it gets one. Only the claims the schedule and the request need are read;
the signature is the API server's to check (the token is our own credential, read from our own
file), so nothing here trusts a claim for anything but timing and naming.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.model.backoff import capped_exponential

__all__ = [
    "MAX_EXPIRATION",
    "MIN_EXPIRATION",
    "InvalidToken",
    "TokenClaims",
    "issued_token",
    "read_claims",
    "retry_delay",
    "seconds_until_renewal",
    "token_request_spec",
    "unrenewable",
]

# the TokenRequest API refuses less than 10 minutes; the admission policy
# (packaging/kubernetes/node-token-policy.yaml) refuses more than a day
MIN_EXPIRATION = 600
MAX_EXPIRATION = 86400


class InvalidToken(ValueError):
    """Not a ServiceAccount token we can read the claims of."""


@dataclass(frozen=True)
class TokenClaims:
    issued_at: float  # iat, seconds since the epoch
    expires_at: float  # exp
    namespace: str | None  # kubernetes.io.namespace
    service_account: str | None  # kubernetes.io.serviceaccount.name
    node: str | None  # kubernetes.io.node.name: bound to that Node (or to a pod on it)
    pod: str | None  # kubernetes.io.pod.name: bound to a pod

    @property
    def lifetime(self) -> float:
        return self.expires_at - self.issued_at


def read_claims(token: str) -> TokenClaims:
    """The claims of a JWT's payload (not verified: see the module's doc)."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise InvalidToken("not a JSON Web Token (three dot-separated parts)")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError) as e:
        raise InvalidToken(f"unreadable claims: {e}") from None
    if not isinstance(claims, Mapping):
        raise InvalidToken("the claims are not a JSON object")
    iat, exp = _number(claims.get("iat")), _number(claims.get("exp"))
    if iat is None or exp is None or exp <= iat:
        raise InvalidToken("no valid iat and exp claims")
    k8s = claims.get("kubernetes.io")
    k8s = k8s if isinstance(k8s, Mapping) else {}
    return TokenClaims(
        issued_at=iat,
        expires_at=exp,
        namespace=_string(k8s.get("namespace")),
        service_account=_name(k8s.get("serviceaccount")),
        node=_name(k8s.get("node")),
        pod=_name(k8s.get("pod")),
    )


def unrenewable(claims: TokenClaims) -> str | None:
    """Why the agent does not renew this token itself (None: it does)."""
    if claims.namespace is None or claims.service_account is None:
        return "it is not a ServiceAccount token"
    if claims.pod is not None:
        return "it is bound to a pod (the kubelet renews a pod's token)"
    if claims.node is None:
        return "it is bound to no Node (a node agent's token names its node)"
    return None


def seconds_until_renewal(claims: TokenClaims, now: float, renew_after: float) -> float:
    """How long until the token has lived `renew_after` (a share) of its life; 0 if it has."""
    due = claims.issued_at + renew_after * claims.lifetime
    return max(0.0, due - now)


def retry_delay(failures: int, base: float, cap: float) -> float:
    """The wait before the next attempt after `failures` failed ones in a row (>= 1)."""
    return capped_exponential(base, 2.0, failures - 1, cap)


def token_request_spec(claims: TokenClaims, expiration: int) -> dict[str, Any]:
    """The TokenRequest spec of the next token: the same Node, `expiration` seconds; no
    audiences (the API server's own)."""
    if claims.node is None:
        raise InvalidToken("the token is bound to no Node")
    return {
        "expirationSeconds": expiration,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Node", "name": claims.node},
    }


def issued_token(response: Mapping[str, Any], current: TokenClaims, now: float) -> str:
    """The token of a TokenRequest's response, checked to be what was asked for: of the same
    ServiceAccount, bound to the same Node, not yet expired."""
    token = (response.get("status") or {}).get("token")
    if not isinstance(token, str) or not token:
        raise InvalidToken("the response has no status.token")
    claims = read_claims(token)
    same = (claims.namespace, claims.service_account, claims.node, claims.pod)
    if same != (current.namespace, current.service_account, current.node, None):
        raise InvalidToken(f"the new token is not the one asked for ({same})")
    if claims.expires_at <= now:
        raise InvalidToken("the new token has expired already")
    return token


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _name(value: object) -> str | None:
    return _string(value.get("name")) if isinstance(value, Mapping) else None
