"""Find the binaries built by tests/e2e/toolchain/build.sh."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TOOLCHAIN_DIR = Path(__file__).resolve().parent / "toolchain"
BUILD_SCRIPT = TOOLCHAIN_DIR / "build.sh"
CLUSTER_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")


class ToolchainMissing(RuntimeError):
    pass


def toolchain_bin_dir() -> Path:
    """The bin dir for the current pins, or $DRAGATE_TOOLCHAIN_BIN when set."""
    override = os.environ.get("DRAGATE_TOOLCHAIN_BIN")
    if override:
        return Path(override)
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-bin-dir"],
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
            "(needs Go and the Go module proxy; ~15-30 min cold), "
            "or set DRAGATE_SKIP_E2E=1 to skip the e2e tests."
        )
    return bin_dir
