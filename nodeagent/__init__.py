"""nodeagent: graceful Kubernetes node shutdowns and maintenance."""

import importlib.metadata


def version() -> str:
    """The installed distribution's version."""
    try:
        return importlib.metadata.version("nodeagent")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown (not installed)"
