"""Fixtures of the chart tests: the toolchain's helm, and the chart rendered with defaults."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from charts.chart_support import Helm, Rendered
from e2e.toolchain_bins import ToolchainMissing, require_binaries, toolchain_bin_dir


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    if os.environ.get("DRAGATE_SKIP_E2E") == "1":
        pytest.skip("DRAGATE_SKIP_E2E=1: chart tests need the toolchain's helm")
    try:
        bin_dir = require_binaries(toolchain_bin_dir(), ("helm",))
    except ToolchainMissing as error:
        pytest.fail(str(error), pytrace=False)
    yield Helm(bin_dir / "helm", tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="session")
def default(helm: Helm) -> Rendered:
    return helm.template()
