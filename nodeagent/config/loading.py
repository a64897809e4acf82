"""Reading the configuration: the YAML file (no key given twice), then the environment."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from nodeagent.config.parsing import from_mapping
from nodeagent.config.schema import Config, ConfigError

__all__ = ["load"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (the second would
    silently win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load(path: Path | None, env: Mapping[str, str] | None = None) -> Config:
    """Read the file (if any), then apply the environment (NODE_NAME, KUBECONFIG)."""
    env = os.environ if env is None else env
    raw: Any = {}
    source = "configuration"
    if path is not None:
        source = str(path)
        try:
            raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader) or {}
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path}: not a text file ({e.reason} at byte {e.start})") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from e
        except RecursionError as e:
            raise ConfigError(f"{path}: nested too deeply to be a configuration") from e
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from e
    cfg = from_mapping(raw, source)
    if cfg.node_name is None and env.get("NODE_NAME"):
        cfg = dataclasses.replace(cfg, node_name=env["NODE_NAME"])
    if cfg.kube.kubeconfig is None and env.get("KUBECONFIG"):
        cfg = dataclasses.replace(
            cfg, kube=dataclasses.replace(cfg.kube, kubeconfig=env["KUBECONFIG"])
        )
    return cfg
