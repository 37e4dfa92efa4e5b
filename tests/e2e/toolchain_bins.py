"""Find the binaries built by tests/e2e/toolchain/build.sh, one bin dir per Kubernetes minor."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TOOLCHAIN_DIR = Path(__file__).resolve().parent / "toolchain"
BUILD_SCRIPT = TOOLCHAIN_DIR / "build.sh"
CLUSTER_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
SUPPORTED_MINORS = ("1.35", "1.36", "1.37")
DEFAULT_MINOR = "1.37"
"""The minor every e2e test runs on; the version matrix adds the others."""


class ToolchainMissing(RuntimeError):
    pass


def override_variable(minor: str) -> str:
    """DRAGATE_TOOLCHAIN_BIN for the default minor, DRAGATE_TOOLCHAIN_BIN_1_36 for 1.36."""
    if minor == DEFAULT_MINOR:
        return "DRAGATE_TOOLCHAIN_BIN"
    return "DRAGATE_TOOLCHAIN_BIN_" + minor.replace(".", "_")


def toolchain_bin_dir(minor: str = DEFAULT_MINOR) -> Path:
    """The bin dir of `minor` for the current pins, or its override variable when set."""
    override = os.environ.get(override_variable(minor))
    if override:
        return Path(override)
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-bin-dir", "--minor", minor],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(result.stdout.strip().splitlines()[-1])


def require_binaries(bin_dir: Path, names: tuple[str, ...] = CLUSTER_BINARIES) -> Path:
    """Return `bin_dir` if it holds every binary in `names`, else raise ToolchainMissing."""
    missing = [name for name in names if not os.access(bin_dir / name, os.X_OK)]
    if missing:
        raise ToolchainMissing(
            f"e2e toolchain missing {', '.join(missing)} in {bin_dir}. "
            f"Build it with `{BUILD_SCRIPT.relative_to(TOOLCHAIN_DIR.parents[2])}` "
            "(needs Go and the Go module proxy; ~8-10 min per minor cold on 2 cores), "
            "narrow the version matrix with DRAGATE_KUBE_MINORS=1.37, "
            "or set DRAGATE_SKIP_E2E=1 to skip the e2e tests."
        )
    return bin_dir
