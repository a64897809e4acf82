"""Typed doors into the corners of the `kubernetes` package that carry no annotations, for admin
calls to the real control plane (the bed's and the tests'): loading a kubeconfig into an
ApiClient, creating the objects of a manifest, watching. The rest of kubernetes.client is typed
(pydantic models; its API methods validate a dict body into the model, as `Model.model_validate`
does)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client, config, utils, watch


def api_client(kubeconfig: Path, headers: Mapping[str, str] | None = None) -> client.ApiClient:
    """An ApiClient for `kubeconfig` (kubernetes.config.new_client_from_config) that sends
    `headers` with every request."""
    api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig)
    )
    for name, value in (headers or {}).items():
        api.set_default_header(name, value)  # type: ignore[no-untyped-call]
    return api


def create_from_dict(api: client.ApiClient, doc: dict[str, Any]) -> None:
    """kubernetes.utils.create_from_dict: the objects of one manifest document (raises
    utils.FailToCreateError)."""
    utils.create_from_dict(api, doc)  # type: ignore[no-untyped-call]


def watch_stream(
    list_fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Iterator[dict[str, Any]]:
    """kubernetes.watch.Watch().stream(list_fn, ...): events {"type": ..., "object": <model>}."""
    w = watch.Watch()  # type: ignore[no-untyped-call]
    events: Iterator[dict[str, Any]] = w.stream(  # type: ignore[no-untyped-call]
        list_fn, *args, **kwargs
    )
    return events
