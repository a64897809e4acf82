"""Unsigned JWTs shaped like the API server's ServiceAccount tokens, for tests that read only
their claims."""

from __future__ import annotations

import base64
import json
from typing import Any


def _part(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def sa_token(
    iat: float,
    exp: float,
    *,
    node: str | None = "node-1",
    pod: str | None = None,
    namespace: str = "nodeagent-system",
    account: str = "nodeagent",
    jti: str = "jti",
) -> str:
    k8s: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": account}}
    if node is not None:
        k8s["node"] = {"name": node, "uid": "node-uid"}
    if pod is not None:
        k8s["pod"] = {"name": pod, "uid": "pod-uid"}
    claims = {"iat": iat, "exp": exp, "jti": jti, "kubernetes.io": k8s}
    return ".".join([_part({"alg": "ES256"}), _part(claims), "c2lnbmF0dXJl"])
