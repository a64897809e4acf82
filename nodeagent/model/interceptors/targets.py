"""Interceptor names and the ordered list of interceptors a pod has (KEP-4563 "Interceptor
Selection"; the annotation and the defaults: see the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import annotations_of
from nodeagent.model.drainplan import PodType, classify, pod_labels
from nodeagent.model.names import (
    DAEMONSET_INTERCEPTOR,
    IMPERATIVE_INTERCEPTOR,
    INTERCEPTORS_ANNOTATION,
    KUBELET_INTERCEPTOR,
)
from nodeagent.model.selectors import DNS_SUBDOMAIN, DNS_SUBDOMAIN_MAX, LabelSelector

__all__ = [
    "MAX_INTERCEPTORS",
    "RESERVED_INTERCEPTORS",
    "InvalidInterceptors",
    "SelectorInterceptor",
    "default_interceptors",
    "parse_interceptor_list",
    "target_interceptors",
    "validate_interceptor_name",
]

RESERVED_INTERCEPTORS = frozenset(
    {KUBELET_INTERCEPTOR, DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR}
)
"""The only ``*.k8s.io`` names a pod may list (KEP: an allow-list of k8s.io interceptors)."""
MAX_INTERCEPTORS = 15
"""At most this many target interceptors, ``imperative-eviction.k8s.io`` included."""


class InvalidInterceptors(ValueError):
    """A pod's interceptor list is malformed; the message says what and where."""


def validate_interceptor_name(name: str) -> str | None:
    """Why ``name`` is not a usable interceptor name (a lowercase DNS subdomain, at most 253
    characters, ``*.k8s.io`` only from :data:`RESERVED_INTERCEPTORS`), or None if it is."""
    if not name:
        return "must not be empty"
    if len(name) > DNS_SUBDOMAIN_MAX:
        return f"must be no more than {DNS_SUBDOMAIN_MAX} characters"
    if not DNS_SUBDOMAIN.fullmatch(name):
        return "must be a lowercase DNS subdomain such as mover.example.com"
    if (name == "k8s.io" or name.endswith(".k8s.io")) and name not in RESERVED_INTERCEPTORS:
        allowed = ", ".join(sorted(RESERVED_INTERCEPTORS))
        return f"k8s.io names are reserved; the allowed ones are {allowed}"
    return None


def parse_interceptor_list(value: str) -> tuple[str, ...]:
    """The names of an ``nodeagent.io/eviction-interceptors`` value, in order, without
    ``imperative-eviction.k8s.io`` (which :func:`target_interceptors` appends).

    An empty value means "no interceptors" (only the imperative eviction). Whitespace around
    names is ignored. ``imperative-eviction.k8s.io`` may be written, but only last. Raises
    :class:`InvalidInterceptors` for empty items, invalid or repeated names, and lists longer than
    :data:`MAX_INTERCEPTORS` with the imperative interceptor counted.
    """
    if not value.strip():
        return ()
    items = [item.strip() for item in value.split(",")]
    names: list[str] = []
    seen: dict[str, int] = {}
    for i, name in enumerate(items):
        where = f"item {i + 1} ({name!r})" if name else f"item {i + 1}"
        if (why := validate_interceptor_name(name)) is not None:
            raise InvalidInterceptors(f"{where}: {why}")
        if name in seen:
            raise InvalidInterceptors(f"{where}: repeats item {seen[name] + 1}")
        seen[name] = i
        if name == IMPERATIVE_INTERCEPTOR:
            if i != len(items) - 1:
                raise InvalidInterceptors(f"{where}: {IMPERATIVE_INTERCEPTOR} can only be last")
            continue
        names.append(name)
    if len(names) + 1 > MAX_INTERCEPTORS:
        raise InvalidInterceptors(
            f"{len(names)} interceptors; at most {MAX_INTERCEPTORS - 1} besides "
            f"{IMPERATIVE_INTERCEPTOR}, which always comes last"
        )
    return tuple(names)


@dataclass(frozen=True)
class SelectorInterceptor:
    """A configured interceptor that is a default for the pods its selector matches."""

    name: str
    selector: LabelSelector


def target_interceptors(
    pod: Mapping[str, Any], configured: Sequence[SelectorInterceptor] = ()
) -> tuple[str, ...]:
    """The pod's interceptors in order, ``imperative-eviction.k8s.io`` last (KEP "Interceptor
    Selection"). Raises :class:`InvalidInterceptors` naming the annotation when it is malformed."""
    raw = annotations_of(pod).get(INTERCEPTORS_ANNOTATION)
    if raw is not None:
        if not isinstance(raw, str):
            raise InvalidInterceptors(f"annotation {INTERCEPTORS_ANNOTATION}: must be a string")
        try:
            names = list(parse_interceptor_list(raw))
        except InvalidInterceptors as exc:
            raise InvalidInterceptors(f"annotation {INTERCEPTORS_ANNOTATION}: {exc}") from None
        return (*names, IMPERATIVE_INTERCEPTOR)
    return default_interceptors(pod, configured)


def default_interceptors(
    pod: Mapping[str, Any], configured: Sequence[SelectorInterceptor] = ()
) -> tuple[str, ...]:
    """The interceptors a pod gets without (or despite) its annotation, imperative last."""
    labels = pod_labels(pod)
    defaults: list[str] = []
    for interceptor in configured:
        if interceptor.selector.matches(labels) and interceptor.name not in defaults:
            defaults.append(interceptor.name)
    pod_type = classify(pod).pod_type
    if pod_type is PodType.STATIC:
        defaults.append(KUBELET_INTERCEPTOR)
    elif pod_type is PodType.DAEMONSET:
        defaults.append(DAEMONSET_INTERCEPTOR)
    defaults = [n for n in dict.fromkeys(defaults) if n != IMPERATIVE_INTERCEPTOR]
    # Configuration could list more matching interceptors than fit; keep the first ones.
    return (*defaults[: MAX_INTERCEPTORS - 1], IMPERATIVE_INTERCEPTOR)
