"""nodeagent.kube.official_client: the agent imports only the official client's transport.

Each check runs in a fresh interpreter (`python -c`), since what matters is which modules an
import leaves in `sys.modules`, and this test process has imported the whole client already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]


def _run(code: str, *, path: list[Path] | None = None, env: dict[str, str] | None = None) -> Any:
    """Run `code` in a new interpreter; it prints one JSON document, returned decoded."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*(path or []), REPO])
    environ.update(env or {})
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_the_agent_imports_no_model_and_no_unused_subpackage() -> None:
    got = _run(
        """
        import json, sys
        import nodeagent.app  # everything `nodeagent run` imports before it starts
        from nodeagent.kube import official_client
        print(json.dumps({
            "modules": sorted(sys.modules),
            "light": [n for n in official_client.LIGHT_PACKAGES if official_client.is_light(n)],
        }))
        """
    )
    modules = set(got["modules"])
    assert "kubernetes.client.rest" in modules
    # nor the ApiClient, which imports pydantic (the transport stands in for it)
    assert not [m for m in modules if m.split(".")[0] == "pydantic"]
    assert "kubernetes.client.api_client" not in modules
    assert not [
        m for m in modules if m.startswith(("kubernetes.client.models.", "kubernetes.client.api."))
    ]
    unused = ("dynamic", "watch", "stream", "leaderelection", "informer", "utils.create_from_yaml")
    assert not [m for m in modules if m.startswith(tuple(f"kubernetes.{u}" for u in unused))]
    # the OIDC refresh's libraries come with the kubeconfig loader only, when one is loaded
    assert not [m for m in modules if m.split(".")[0] in ("requests", "oauthlib", "websocket")]
    assert got["light"] == [
        "kubernetes",
        "kubernetes.client",
        "kubernetes.client.models",
        "kubernetes.config",
        "kubernetes.utils",
    ]


def test_loading_a_kubeconfig_keeps_the_packages_light(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "secret"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    got = _run(
        f"""
        import json, sys
        from nodeagent.kube.connection import load_api_client
        from nodeagent.kube import official_client
        api = load_api_client({str(kubeconfig)!r})
        pydantic = [m for m in sys.modules if m.split(".")[0] == "pydantic"]
        # what the OIDC refresh constructs: the real ApiClient, imported only then
        from kubernetes.config import kube_config
        from kubernetes.client.configuration import Configuration
        refresher = kube_config.ApiClient(configuration=Configuration())
        print(json.dumps({{
            "host": api.configuration.host,
            "models": [m for m in sys.modules if m.startswith("kubernetes.client.models.")],
            "light": [n for n in official_client.LIGHT_PACKAGES if official_client.is_light(n)],
            "pydantic": pydantic,
            "refresher": type(refresher).__module__ + "." + type(refresher).__name__,
        }}))
        """
    )
    assert got["host"] == "https://127.0.0.1:6443"
    assert got["models"] == []
    assert "kubernetes.client.models" in got["light"]
    assert got["pydantic"] == []
    assert got["refresher"] == "kubernetes.client.api_client.ApiClient"


def test_other_code_in_the_process_still_gets_the_whole_client() -> None:
    got = _run(
        """
        import json
        import nodeagent.kube.client
        from kubernetes import client, config
        import kubernetes
        from nodeagent.kube import official_client
        stand_in = client.ApiClient  # asked for before the package completes
        pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p"))
        by_name = getattr(client.models, "V1Pod")  # as ApiClient.deserialize looks models up
        print(json.dumps({
            "api": client.CoreV1Api.__name__,
            "model": by_name is type(pod),
            "pod": client.ApiClient().sanitize_for_serialization(pod),
            "stand_in": type(stand_in()).__name__,
            "real": client.ApiClient.__module__,
            "loader": callable(config.load_kube_config),
            "version": kubernetes.__version__,
            "light": [n for n in official_client.LIGHT_PACKAGES if official_client.is_light(n)],
        }))
        """
    )
    assert got["api"] == "CoreV1Api"
    assert got["model"] is True
    assert got["pod"] == {"metadata": {"name": "p"}}
    assert got["stand_in"] == "ApiClient"
    assert got["real"] == "kubernetes.client.api_client"
    assert got["loader"] is True
    assert got["version"]
    assert got["light"] == ["kubernetes.utils"]  # asked for nothing, so still light


def test_a_client_imported_first_is_left_as_it_is() -> None:
    got = _run(
        """
        import json
        import kubernetes.client
        from nodeagent.kube import official_client
        print(json.dumps({"installed": official_client.install(), "light": [
            n for n in official_client.LIGHT_PACKAGES if official_client.is_light(n)]}))
        """
    )
    assert got == {"installed": False, "light": []}


def test_an_unknown_layout_is_imported_whole(tmp_path: Path) -> None:
    """A client without the expected packages (here no kubernetes.utils) is imported normally,
    its __init__ run."""
    pkg = tmp_path / "kubernetes"
    for d in (pkg, pkg / "client", pkg / "client" / "models", pkg / "config"):
        d.mkdir()
    (pkg / "__init__.py").write_text("WHOLE = True\nfrom . import client, config\n")
    (pkg / "client" / "__init__.py").write_text(
        "from .api_client import ApiClient\nfrom .configuration import Configuration\n"
    )
    (pkg / "client" / "models" / "__init__.py").write_text("")
    (pkg / "client" / "configuration.py").write_text("class Configuration: pass\n")
    (pkg / "client" / "exceptions.py").write_text("class ApiException(Exception): pass\n")
    (pkg / "client" / "rest.py").write_text("")
    (pkg / "client" / "api_client.py").write_text("class ApiClient: pass\n")
    (pkg / "config" / "__init__.py").write_text("")
    (pkg / "config" / "config_exception.py").write_text("class ConfigException(Exception): pass\n")
    got = _run(
        """
        import json, sys
        from nodeagent.kube import official_client
        import kubernetes
        print(json.dumps({"installed": official_client.install(), "whole": kubernetes.WHOLE,
            "file": kubernetes.__file__}))
        """,
        path=[tmp_path],
    )
    assert got["installed"] is False
    assert got["whole"] is True
    assert got["file"] == str(pkg / "__init__.py")
