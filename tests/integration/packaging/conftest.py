"""The `helm` fixture of the chart's tests: real helm (v3, pinned in scripts/helm/go.mod), built
from its Go module into the test cache by tests/helmbuild.py on first use. Without a Go
toolchain the tests that take it are skipped, except under NODEAGENT_TEST_CLUSTER=real|both, as
in CI, where they fail."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from tests.helmbuild import BuildError, ensure_helm


@functools.cache
def _helm_or_reason() -> Path | str:
    try:
        return ensure_helm(log=False)
    except BuildError as e:
        return str(e)


@pytest.fixture
def helm() -> Path:
    found = _helm_or_reason()
    if isinstance(found, Path):
        return found
    if os.environ.get("NODEAGENT_TEST_CLUSTER") in ("real", "both"):
        pytest.fail(f"helm cannot be built: {found}", pytrace=False)
    pytest.skip(f"helm cannot be built: {found}")
