"""Import only the modules of the official `kubernetes` client that nodeagent uses.

`import kubernetes.client` runs `kubernetes/__init__.py`, which imports every subpackage:
dynamic, watch, stream (websocket-client), utils, leaderelection, informer, and config, whose
`kube_config` imports requests, oauthlib and requests-oauthlib (OIDC token refresh). Older
clients (before 35) also import every API and model class in `kubernetes/client/__init__.py`.
nodeagent sends and receives dicts: it uses the transport (`client.configuration`, `rest`,
`exceptions`) and one of the config loaders (`config.kube_config` or `config.incluster_config`),
none of which needs a model class. Nor the `ApiClient` (`nodeagent.kube.transport` stands in
for it), which imports pydantic: `config.kube_config` imports its name at load and calls it
only to refresh an OIDC token, so the light `kubernetes.client` holds a stand-in that imports
the real class when called.

`install()` registers the packages `kubernetes`, `kubernetes.client`,
`kubernetes.client.models`, `kubernetes.config` and `kubernetes.utils` as package objects
with their real spec and `__path__` but without running their `__init__`, then imports the
transport's modules, so importing a submodule runs that module alone. Each such package
completes itself (runs its real `__init__`) the first time something asks it for a name it
does not have, so other code in the process that uses the whole client (`kubernetes.client.
CoreV1Api`, `kubernetes.config.load_kube_config`) still finds it. Where the installed client
is laid out differently, or was imported already, the normal import happens instead.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from types import ModuleType
from typing import Any

__all__ = ["LIGHT_PACKAGES", "TRANSPORT", "install", "is_light"]

log = logging.getLogger(__name__)

# the packages registered without their __init__, parents first
LIGHT_PACKAGES = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.models",
    "kubernetes.config",
    "kubernetes.utils",
)
# what nodeagent.kube imports of the client (the config loaders come later, one of them)
TRANSPORT = (
    "kubernetes.client.configuration",
    "kubernetes.client.exceptions",
    "kubernetes.client.rest",
    "kubernetes.config.config_exception",
)
# the name the real kubernetes/client/__init__.py exports that config.incluster_config and
# config.kube_config import from it (and kube_config ApiClient: _DeferredApiClient)
_CLIENT_NAMES = {"Configuration": "kubernetes.client.configuration"}
_lock = threading.RLock()
_light: dict[str, ModuleType] = {}  # name -> package whose __init__ has not run yet


def is_light(name: str) -> bool:
    """Whether package `name` is registered and its `__init__` has not run."""
    return name in _light


def install() -> bool:
    """Register the light packages and import the transport (idempotent). False where the
    normal import was done instead: the client was imported already or its layout differs."""
    with _lock:
        if _light:
            return True
        if "kubernetes" in sys.modules:
            return False  # imported whole before us: nothing to save
        specs = _package_specs()
        if specs is None:
            log.debug("kubernetes client layout not recognised: importing it whole")
            _import_whole()
            return False
        for name, spec in specs.items():
            module = importlib.util.module_from_spec(spec)
            setattr(module, "__getattr__", _completer(module))  # noqa: B010 (a module attribute)
            _light[name] = module
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
        try:
            for name in TRANSPORT:
                importlib.import_module(name)
            client = sys.modules["kubernetes.client"]
            for attr, where in _CLIENT_NAMES.items():
                setattr(client, attr, getattr(sys.modules[where], attr))
            setattr(client, "ApiClient", _DeferredApiClient)  # noqa: B010 (a module attribute)
        except Exception:
            # a layout we did not foresee: turn every package into the real one, as if
            # imported normally (which raises again if the client is broken)
            log.debug("kubernetes client not importable in parts: importing it whole")
            for name in reversed(LIGHT_PACKAGES):
                _complete(name)
            _import_whole()
            return False
        return True


class _DeferredApiClient:
    """`kubernetes.client.ApiClient` while that package is light: constructing one imports
    and returns the real class's instance (and pydantic, which only it needs)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.api_client import ApiClient

        return ApiClient(*args, **kwargs)


def _import_whole() -> None:
    for name in TRANSPORT:
        importlib.import_module(name)


def _package_specs() -> dict[str, importlib.machinery.ModuleSpec] | None:
    """The specs of LIGHT_PACKAGES, found without importing anything; None unless each is a
    package and each module of TRANSPORT is there."""
    specs: dict[str, importlib.machinery.ModuleSpec] = {}
    for name in LIGHT_PACKAGES:
        parent = name.rpartition(".")[0]
        path = list(specs[parent].submodule_search_locations or []) if parent else None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not spec.submodule_search_locations:
            return None
        specs[name] = spec
    for name in TRANSPORT:
        package = specs[name.rpartition(".")[0]]
        found = importlib.machinery.PathFinder.find_spec(
            name, list(package.submodule_search_locations or [])
        )
        if found is None:
            return None
    return specs


def _completer(module: ModuleType) -> Any:
    name = module.__name__

    def __getattr__(attr: str) -> Any:
        _complete(name)
        try:
            return module.__dict__[attr]
        except KeyError:
            # the real __init__ may define its own lazy __getattr__ (kubernetes >= 35)
            real = module.__dict__.get("__getattr__")
            if real is not None and real is not __getattr__:
                return real(attr)
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    return __getattr__


def _complete(name: str) -> None:
    """Run the real `__init__` of a light package inside it: it becomes the package a normal
    import makes (the submodules already imported are reused)."""
    with _lock:
        module = _light.pop(name, None)
        if module is None:
            return
        module.__dict__.pop("__getattr__", None)
        if module.__dict__.get("ApiClient") is _DeferredApiClient:
            del module.__dict__["ApiClient"]  # the real __init__ binds it, or finds it lazily
        log.debug("completing package %s (something asked it for a name it lacks)", name)
        loader = module.__spec__.loader if module.__spec__ is not None else None
        assert loader is not None
        loader.exec_module(module)
