"""How the agent reaches the API server: the client config from a kubeconfig or the pod's
ServiceAccount, no hidden retries, TCP keepalive; the `Transport` that sends on it."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.configuration import Configuration
from kubernetes.config.config_exception import ConfigException
from urllib3.connection import HTTPConnection
from urllib3.util.retry import Retry

from nodeagent.kube.errors import KubeConfigError
from nodeagent.kube.tokenfile import TokenFile, kubeconfig_token_file
from nodeagent.kube.transport import Transport

__all__ = ["load_api_client"]


def _check_kubeconfig(path: str) -> None:
    """What the client's loader would fail on with a traceback (a TypeError for a file that is
    not a mapping, a YAML parser error), said in one line."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise KubeConfigError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "cannot be parsed"
        raise KubeConfigError(f"{path} is not YAML{where}: {problem}") from e
    if not isinstance(doc, dict):
        raise KubeConfigError(
            f"{path} is not a kubeconfig (it holds no mapping of clusters, users and contexts)"
        )


def load_api_client(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    connection_pool_maxsize: int | None = None,
) -> Transport:
    """The transport from `kubeconfig`; else in-cluster config; else ~/.kube/config ($KUBECONFIG).

    Size the connection pool for the request pool plus the watches, or urllib3 keeps
    discarding connections. Only the loader used is imported: `kube_config` brings requests
    and oauthlib (its OIDC refresh), which an agent in a pod never needs.
    """
    config = Configuration()
    try:
        if kubeconfig:
            _check_kubeconfig(kubeconfig)
            _load_kube_config(config, config_file=kubeconfig, context=context)
            token_file = kubeconfig_token_file(kubeconfig, context)
            if token_file is not None:
                # the loader read the file once; this rereads it when it changes (renewed)
                config.refresh_api_key_hook = TokenFile(token_file)  # type: ignore[assignment]
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and context is None:
            from kubernetes.config.incluster_config import load_incluster_config

            load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
        else:
            default = Path("~/.kube/config").expanduser()
            if not os.environ.get("KUBECONFIG") and not default.exists():
                # the client's loader said "Invalid kube-config file. No configuration found."
                raise KubeConfigError(
                    "no kubeconfig given (kube.kubeconfig, --kubeconfig or KUBECONFIG), none "
                    f"at {default}, and not in a pod (no KUBERNETES_SERVICE_HOST)"
                )
            _load_kube_config(config, context=context)
    except (ConfigException, OSError, ValueError) as exc:
        where = kubeconfig or "in-cluster or default kubeconfig"
        raise KubeConfigError(f"cannot load Kubernetes client config ({where}): {exc}") from exc
    if connection_pool_maxsize is not None:
        config.connection_pool_maxsize = connection_pool_maxsize
    # no hidden retries of a request the server received: one that hangs must fail after its
    # own timeout, not three times that (urllib3 retries reads by default); a refused or
    # broken connection is retried once at once
    config.retries = Retry(total=1, connect=1, read=0, redirect=0, status=0, other=0)
    # a watch lasts up to an hour: a peer gone without a word (a node's network, a load
    # balancer that forgot us) must be noticed sooner. The client's keep_alive is off by default
    config.socket_options = _keepalive_options()
    return Transport(config)


def _keepalive_options() -> list[tuple[int, int, int]]:
    """urllib3's own socket options (no Nagle) and TCP keepalive with client-go's timings: the
    first probe after 30 s idle, the connection dropped after 9 more unanswered 15 s apart."""
    options = list(HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 15), ("TCP_KEEPCNT", 9)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


def _load_kube_config(config: Configuration, **kw: Any) -> None:
    from kubernetes.config.kube_config import load_kube_config

    load_kube_config(client_configuration=config, persist_config=False, **kw)  # type: ignore[no-untyped-call]
